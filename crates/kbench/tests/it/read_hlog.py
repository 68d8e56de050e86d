"""Read an HdrHistogram interval log with HdrHistogram_py (PyPI `hdrhistogram`), an implementation
that is not kbench's: print, per tag, the number of interval lines and the sum of its intervals
(total count, p50, p99, max), as one JSON object. Any line the reader cannot decode fails here."""
import json
import sys

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader


def main(path):
    reader = HistogramLogReader(path, HdrHistogram(1, 3_600_000_000, 3))
    sums, lines = {}, {}
    while True:
        interval = reader.get_next_interval_histogram()
        if interval is None:
            break
        tag = interval.get_tag()
        if tag not in sums:
            sums[tag], lines[tag] = HdrHistogram(1, 3_600_000_000, 3), 0
        sums[tag].add(interval)
        lines[tag] += 1
    data_lines = sum(1 for line in open(path, encoding="utf-8") if line.startswith("Tag="))
    if data_lines != sum(lines.values()):
        sys.exit(f"{path}: {data_lines} interval lines, of which HdrHistogram_py read {sum(lines.values())}")
    out = {
        tag: {
            "lines": lines[tag],
            "count": h.get_total_count(),
            "p50": h.get_value_at_percentile(50),
            "p99": h.get_value_at_percentile(99),
            "max": h.get_max_value(),
        }
        for tag, h in sums.items()
    }
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
