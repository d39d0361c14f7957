"""Generators for the tests of the reference machinery itself (tests/support/torch_ref_test.cpp).

- pid: the server's process id (so a test can kill it between calls).
- calls: how many times it has been called in this server (1, 2, ...): a cached reference would repeat.
- echo: returns its input "x".
- exit: ends the server at once with args["status"] (as a crash would), without a reply.
"""
import os

import torch

_calls = 0


def pid(inp, args):
    return {"pid": torch.tensor([os.getpid()], dtype=torch.int64)}


def calls(inp, args):
    global _calls
    _calls += 1
    return {"calls": torch.tensor([_calls], dtype=torch.int64)}


def echo(inp, args):
    return {"x": inp["x"]}


def exit(inp, args):  # noqa: A001 (the generator's name in the tests)
    os._exit(int(args.get("status", 3)))
