"""The one user-error type: raised anywhere, caught once at the CLI edge, printed as one line; and the
exit codes every command shares (the README's table)."""

import errno
from typing import Callable

EXIT_OK = 0
EXIT_VERDICT = 1  # the measurement's verdict is negative: a regression, a suspect, wrong data, below a floor
EXIT_BAD_INPUT = 2  # refused before measuring: an option, a file, a layout
EXIT_RUN_FAILED = 3  # the run itself failed: a rank died or stalled, a rendezvous failed; results so far kept
EXIT_INTERRUPTED = 130  # SIGINT/SIGTERM: stopped on request; results so far kept


class UserInputError(Exception):
    """Bad input from the user; names the option (or file) at fault and what is wrong with it."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, option: str, problem: str):
        super().__init__(f"{option}: {problem}")
        self.option = option
        self.problem = problem


class OptionError(UserInputError):
    """Bad input, raised below cli/, where options are known by key (a config's field): it names the option
    at fault by its key, and each option its problem mentions as {key}; cli/ writes their flags (`named`)."""

    def __init__(self, key: str, problem: str, mentions: tuple[str, ...] = (), value: str | None = None):
        super().__init__(key if value is None else f"{key} {value}", problem)
        self.key = key
        self.mentions = mentions
        self.value = value  # the value given, where the error names it beside the option (--baseline PATH)

    def named(self, name_of: Callable[[str], str]) -> UserInputError:
        """The same error as the command line says it: every key written as its option's flag."""
        problem = with_names(self.problem, self.mentions, name_of)
        name = name_of(self.key)
        return UserInputError(name if self.value is None else f"{name} {self.value}", problem)


def with_names(text: str, mentions: tuple[str, ...], name_of: Callable[[str], str]) -> str:
    """`text` with each option it mentions as {key} written as its flag."""
    for key in mentions:
        text = text.replace("{" + key + "}", name_of(key))
    return text


def off(key: str) -> str:
    """How an OptionError names the flag that turns a switch off (--no-check), by the switch's key."""
    return f"{key}/off"


class RunFailedError(Exception):
    """A distributed run failed after it started (a rank died, a timeout); partial results are kept."""

    def __init__(self, message: str, exit_code: int = EXIT_RUN_FAILED, quiet: bool = False):
        super().__init__(message)
        self.exit_code = exit_code
        self.quiet = quiet  # another rank prints this failure; this one only exits non-zero
        # Lines that follow the one-line answer: what the backend itself said (NCCL's warnings).
        self.details: tuple[str, ...] = ()
        # The process group was aborted: end the process without tearing torch down (its
        # destructors would join threads that the abort left waiting).
        self.exit_at_once = False


class WriteFailedError(RunFailedError):
    """A file the command writes could not be written (a full disk, a read-only mount); what was
    written before it is kept readable."""

    def __init__(self, path, exc: OSError):
        super().__init__(write_error_text(exc, path))
        self.path = path


def write_error_text(exc: OSError, path=None) -> str:
    """One line for a failed write: "no space left on PATH", or the system's reason."""
    where = path if path is not None else exc.filename if exc.filename is not None else "the device"
    if exc.errno == errno.ENOSPC:
        return f"no space left on {where}"
    return f"cannot write {where}: {exc.strerror or exc}"


def os_error_text(exc: OSError) -> str:
    """One line for a failed file operation, read or write: the file, then what went wrong."""
    if exc.errno == errno.ENOSPC:
        return write_error_text(exc)
    where = f"{exc.filename}: " if exc.filename is not None else ""
    return f"{where}{exc.strerror or first_line(exc)}"


def first_line(exc: BaseException) -> str:
    """An exception's first line of text, or its type's name when it has none."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


class StoreError(Exception):
    """The history cannot be opened, read or written: one line naming it and the cause. Its exit code:
    EXIT_RUN_FAILED where the history is unusable now (locked, unreachable, read-only, damaged),
    EXIT_BAD_INPUT where what was named is no history at all (a folder, another program's file)."""

    def __init__(self, message: str, exit_code: int = EXIT_RUN_FAILED):
        super().__init__(message)
        self.exit_code = exit_code
