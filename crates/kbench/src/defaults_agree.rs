//! Every default is defined once, in the library's specs: the spec built from an empty command line,
//! an empty `/v1` body and a minimal seed payload are the spec's default (ids and seeds, fresh per
//! run, aside).

use clap::Parser;
use kbench_bench::ProduceSpec;
use kbench_bench::e2e::E2eSpec;

use crate::cli::{Cli, Command};

/// The same spec with the per-run fresh values (group id, consumer id, seed) of `like`.
fn with_ids_of(mut spec: E2eSpec, like: &E2eSpec) -> E2eSpec {
    spec.group_id = like.group_id.clone();
    spec.consumer_id = like.consumer_id.clone();
    spec.seed = like.seed;
    spec
}

#[test]
fn e2e_defaults_agree_across_the_cli_v1_and_the_seed_payload() {
    let default = E2eSpec::default();
    let Command::E2e(args) = Cli::try_parse_from(["kbench", "e2e"]).unwrap().command else {
        unreachable!()
    };
    let cli = crate::cmd::e2e::spec_from(&args).unwrap();
    let (v1, _) = crate::serve::v1::e2e_spec(&Default::default(), Default::default()).unwrap();
    let seed = crate::serve::pub_sub::tests::spec_of_payload(
        crate::serve::pub_sub::tests::minimal_payload(),
    );
    assert_eq!(with_ids_of(cli, &default), default, "kbench e2e");
    assert_eq!(
        with_ids_of(v1, &default),
        default,
        "/v1 {{\"workload\": \"e2e\"}}"
    );
    assert_eq!(
        with_ids_of(seed, &default),
        default,
        "minimal /pub-sub-demo"
    );
}

#[test]
fn produce_defaults_agree_across_the_cli_and_v1() {
    let default = ProduceSpec::default();
    let Command::Produce(args) = Cli::try_parse_from(["kbench", "produce"]).unwrap().command else {
        unreachable!()
    };
    let cli = crate::cmd::produce::plan(&args).unwrap().spec;
    let (v1, _) = crate::serve::v1::produce_spec(&Default::default(), Default::default()).unwrap();
    let same = |mut s: ProduceSpec| {
        s.seed = default.seed;
        s
    };
    assert_eq!(same(cli), default, "kbench produce");
    // /v1 reports progress every second (its live counters); everything else is the default.
    assert_eq!(v1.reporting_interval, std::time::Duration::from_secs(1));
    let v1 = ProduceSpec {
        reporting_interval: default.reporting_interval,
        ..same(v1)
    };
    assert_eq!(v1, default, "/v1 {{\"workload\": \"produce\"}}");
}

#[test]
fn consume_defaults_agree_across_the_cli_and_the_spec() {
    use kbench_bench::consume::ConsumeSpec;
    let default = ConsumeSpec::default();
    let Command::Consume(args) = Cli::try_parse_from(["kbench", "consume"]).unwrap().command else {
        unreachable!()
    };
    let cli = crate::cmd::consume::plan(&args).unwrap().spec;
    // The group id is fresh per run (perf-consumer-N, as kafka-consumer-perf-test names it).
    assert_eq!(
        ConsumeSpec {
            mode: default.mode.clone(),
            ..cli
        },
        default,
        "kbench consume"
    );
}
