"""Stage `packets`: pool + chunks + frozen, reviewed intents → one packet per query and role.

Refuses (ProtocolError) unless the intents manifest names a reviewer and its sha256 matches
the frozen intent table. The packet folder is written complete beside its target and then
swapped in, so a failure leaves the previous packets untouched.
"""

import os
import shutil
import tempfile
from pathlib import Path

from relgrade.experiment.stage import path_of, run_stage, section
from relgrade.io.files import (
    read_json,
    read_jsonl,
    read_table,
    write_json,
    write_parquet,
)
from relgrade.protocol import intents, packets
from relgrade.schema import ROLES


def write_packet_folder(root: Path, built: dict) -> None:
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.", suffix=".tmp", dir=root.parent))
    old = root.with_name(f".{root.name}.{os.getpid()}.old")
    try:
        for role in ROLES:
            (tmp / role).mkdir()
            for packet in built.get(role, []):
                write_json(tmp / role / packets.packet_filename(packet["query_id"]), packet)
        if root.exists():
            os.replace(root, old)
        os.replace(tmp, root)
    finally:
        for leftover in (tmp, old):
            if leftover.exists():
                shutil.rmtree(leftover)


def main(params):
    grading, manifest_path = section(params, "grading"), path_of(params, "intents_manifest")
    manifest = read_json(manifest_path) if manifest_path.exists() else None
    frozen = read_table(path_of(params, "intents")) if manifest is not None else None
    sha = intents.check_frozen(frozen, manifest, path=manifest_path)
    orders = packets.build_orders(
        read_table(path_of(params, "pool"), columns=["query_id", "chunk_id"]),
        seed=params["seed"], round=grading["round"], batch_size=grading["batch_size"],
        audit_ids=[row["query_id"] for row in read_jsonl(path_of(params, "audit"))])
    built = packets.build_packets(orders, chunks=read_table(path_of(params, "chunks")),
                                  intents=frozen, rubric_version=grading["rubric_version"],
                                  intents_sha256=sha)
    write_packet_folder(path_of(params, "packets"), built)
    write_parquet(path_of(params, "orders"), orders)


if __name__ == "__main__":
    run_stage(main)
