"""The reference for kbench's change-point test (changepoint_otava.rs): every series of
otava-test-data's standard suite, with its ground truth, and what Apache Otava finds in it.

The suite is the one otava-test-data's `otava-gen generate` writes by default: every generator at
lengths 50 and 500, noise sigma 0, 2, 5 and 10, plus the pairwise combinations, seed 42. Otava runs
with its own defaults (otava.series.AnalysisOptions: window 50, max p-value 0.001, min magnitude 0),
through otava.analysis.compute_change_points, the function `otava analyze` calls per metric.

Prints one JSON document on stdout.
"""

import importlib.metadata as metadata
import json
import sys

from otava.analysis import compute_change_points
from otava_test_data.generators.combiner import CombinationGenerator

WINDOW, MAX_PVALUE, MIN_MAGNITUDE = 50, 0.001, 0.0


def name_of(i, ts):
    return f"{i:03d} {ts.generator_name} L{len(ts)} noise={ts.parameters.get('noise_sigma', 0.0):g}"


def main():
    generator = CombinationGenerator(lengths=[50, 500], seed=42)
    suite = generator.generate_all_test_cases(include_combinations=True, noise_levels=[0.0, 2.0, 5.0, 10.0])
    series = []
    for i, ts in enumerate(suite):
        data = [float(v) for v in ts.data]
        found, _weak = compute_change_points(
            list(data), window_len=WINDOW, max_pvalue=MAX_PVALUE, min_magnitude=MIN_MAGNITUDE
        )
        series.append({
            "name": name_of(i, ts),
            "data": data,
            "truth": sorted(int(cp.index) for cp in ts.change_points),
            "otava": [
                {
                    "index": int(cp.index),
                    "pvalue": float(cp.stats.pvalue),
                    "forward_change_percent": float(cp.stats.forward_change_percent()),
                }
                for cp in found
            ],
        })
    json.dump({
        "apache_otava": metadata.version("apache-otava"),
        "otava_test_data": metadata.version("otava-test-data"),
        "options": {"window": WINDOW, "max_pvalue": MAX_PVALUE, "min_magnitude": MIN_MAGNITUDE},
        "series": series,
    }, sys.stdout)


if __name__ == "__main__":
    main()
