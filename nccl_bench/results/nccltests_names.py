"""Which collective an nccl-tests log ran: from the binary its text names (all_reduce_perf), or from the
file's name as people write it (allreduce_16nodes.txt). Names come from units/op_table.OPS:
the ops nccl-tests has a binary for."""

from __future__ import annotations

import re

from nccl_bench.units import op_table

_BINARY_PATTERN = re.compile(r"(?:^|[/\s:])([a-z][a-z_]*?)_perf(?:_mpi)?(?![A-Za-z0-9])")


# A file name names the op anywhere in it, as people write it: the binary (run3_all_reduce_perf.log)
# or the op with its words joined by nothing, '-' or '_' in any case (allreduce_16nodes.txt,
# sendrecv_8xa100.log, reducescatter-dgx2.txt). Only known names count, not inside a longer word,
# longest first so reduce_scatter is not read as scatter, nor alltoallv as alltoall.
def _joined(name: str) -> str:
    return name.replace("_", "")


_NAMED_OPS: dict[str, str] = {
    _joined(name): op for binary, op in op_table.OP_OF_BINARY.items() for name in (op, binary)
}
_FILE_OP_PATTERN = re.compile(
    r"(?<![a-z])("
    + "|".join(
        "[-_]?".join(re.escape(part) for part in name.split("_"))
        for name in sorted({n for binary, op in op_table.OP_OF_BINARY.items() for n in (op, binary)},
                           key=lambda n: len(_joined(n)), reverse=True)
    )
    + r")(?![a-z])",
    re.IGNORECASE,
)


def op_of_file_name(name: str) -> str | None:
    """The op a log's file name names (allreduce_16nodes.txt -> all_reduce), or None."""
    found = _FILE_OP_PATTERN.search(name)
    return None if found is None else _NAMED_OPS[re.sub("[-_]", "", found.group(1)).lower()]


def op_in(text: str) -> str | None:
    match = _BINARY_PATTERN.search(text)
    return op_table.op_of_binary(match.group(1)) if match else None
