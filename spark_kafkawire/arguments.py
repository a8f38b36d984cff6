"""Command lines whose mistakes are one line: the ``kafkawire`` command and the audit job parse
their arguments with :class:`OneLineParser`, so a mistyped flag is ``NAME: unrecognized arguments:
--incremntal (did you mean --incremental?); NAME --help lists the options`` on stderr and exit
status 1, the status both give every error (the audit job's 2 means "a policy failed")."""

from __future__ import annotations

import argparse
import difflib
import sys


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one escaped line naming the nearest known flag, and exit status 1
    (not argparse's usage block and status 2). Sub-commands' parsers are of the same class."""

    def error(self, message: str):  # type: ignore[override,unused-ignore]
        from .escape import printable

        name = self.prog.split()[0]
        print(f"{name.removesuffix('.py')}: {printable(message + nearest(self, message))}; "
              f"{self.prog} --help lists the options", file=sys.stderr)
        sys.exit(1)


def nearest(ap: argparse.ArgumentParser, message: str) -> str:
    """`` (did you mean --incremental?)`` for the unknown flags of argparse's ``message`` that are
    close to a known one; empty for other messages."""
    if not message.startswith("unrecognized arguments:"):
        return ""
    known = _flags(ap)
    said = []
    for word in message.removeprefix("unrecognized arguments:").split():
        flag = word.split("=")[0]
        close = difflib.get_close_matches(flag, known, n=1, cutoff=0.75) if flag.startswith("--") else []
        if close:
            said.append((flag, close[0]))
    if len(said) == 1:
        return f" (did you mean {said[0][1]}?)"
    return f" (did you mean {', '.join(f'{b} for {a}' for a, b in said)}?)" if said else ""


def _flags(ap: argparse.ArgumentParser) -> list[str]:
    """Every flag of ``ap`` and of its sub-commands (argparse reports a sub-command's unknown flag
    from the top parser)."""
    out: list[str] = []
    for action in ap._actions:
        out += action.option_strings
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                out += [f for f in _flags(sub) if f not in out]
    return out
