"""Join the outputs of a --shard run (score-table, score-nbest, translate) into the whole output.

Give the N outputs in any order (a shell glob does): each has a manifest, OUT.shard.yaml, written
when its shard finished. merge-shards checks that shards 1..N are all there, each complete and
unchanged since, made from the same input with the same settings, and contiguous, then writes
their text in order: what the same command writes without --shard, byte for byte (a .gz output is
recompressed as rerank writes gzip, so its bytes match too, with the same zlib). A missing, stale
or foreign shard is an error that names it, and nothing is written.

  rerank score-table table.gz -o parts/table.$I-of-8.gz --model M --shard $I/8    # each array task
  rerank merge-shards parts/table.*-of-8.gz -o table.rnn.gz \\
      --moses-ini moses.ini --moses-ini-out moses.rnn.ini
"""

from __future__ import annotations

import argparse
import logging

from rerank.commands.arguments import StoreOnce, check_moses_ini_options, finite_float

logger = logging.getLogger(__name__)

# files written and read, checked by rerank.cli before the command runs: no output is an input
OUTPUTS = ("output", "moses_ini_out")
INPUTS = ("shards", "moses_ini")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from rerank.formats.moses_ini import TRAIN_MODEL_WEIGHT

    parser.add_argument("shards", nargs="+", metavar="PART", help="the output of each shard (-o of its run)")
    parser.add_argument("-o", "--output", required=True, action=StoreOnce, metavar="OUT",
                        help="the whole output (.gz for gzip)")
    ini = parser.add_argument_group("moses.ini (score-table shards)")
    ini.add_argument("--moses-ini", action=StoreOnce, metavar="IN", help="the configuration that uses the table")
    ini.add_argument("--moses-ini-out", action=StoreOnce, metavar="OUT",
                     help="where to write it with the new score and OUT as the table")
    ini.add_argument("--table", default="TranslationModel0", metavar="NAME",
                     help="the table's feature name in IN (default: %(default)s)")
    ini.add_argument("--weight", type=finite_float, default=TRAIN_MODEL_WEIGHT, metavar="W",
                     help="initial weight of the new score (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    from rerank.errors import RerankError
    from rerank.formats.files import STDIO, check_outputs, committed_together
    from rerank.formats.scored import has_record, record_path, write_joined_record
    from rerank.formats.shards import check_shards, manifest_path, merge_shards

    check_moses_ini_options(args)
    if args.output == STDIO:
        raise RerankError("merge-shards writes a file: give -o OUT")
    record = record_path(args.output) if has_record(args.output) else None
    check_outputs([("--output", args.output), ("--moses-ini-out", args.moses_ini_out), ("--output's record", record)],
                  [*args.shards, *map(manifest_path, args.shards), *map(record_path, args.shards)])
    ini = None
    if args.moses_ini is not None:
        shards = check_shards(args.shards)
        if shards[0].command != "score-table":
            raise RerankError(f"--moses-ini is for the shards of score-table, not of {shards[0].command}")
        from rerank.formats.phrase_table import read_phrase_table
        from rerank.scoring.table import table_moses_ini

        num_scores = None  # of the table that was scored: one less than its shards have
        for shard in shards:
            entry = next(read_phrase_table(shard.path, str(shard.settings.get("encoding") or "utf-8")), None)
            if entry is not None:
                num_scores = len(entry.scores) - 1
                break
        ini = table_moses_ini(args.moses_ini, args.moses_ini_out, args.table, num_scores, args.output, args.weight)
    with committed_together():  # the whole output, its moses.ini and an n-best list's record appear together
        ordered = merge_shards(args.shards, args.output)
        if ini is not None:
            ini.write(args.moses_ini_out)
        if ordered[0].command == "score-nbest" and not write_joined_record([o.path for o in ordered], args.output):
            logger.warning("%s: a shard has no record of what its features were computed from (%s): the list has "
                           "none either (--reuse will refuse it)", args.output, record_path(ordered[0].path).name)
    logger.info("%s: the %d shards of %s (%s of %s)", args.output, len(ordered), ordered[0].input.get("path"),
                ordered[0].kind, ordered[0].command)
    if ini is not None:
        logger.info("%s: %s has one more score, weighted %g, read from %s", args.moses_ini_out, args.table,
                    args.weight, args.output)
    return 0
