//! `kbench e2e-latency`'s arguments: Kafka's `EndToEndLatency` (kafka-e2e-latency.sh) as its users
//! type it, either form. 3.x took five or six positional arguments (`broker_list topic num_messages
//! producer_acks message_size_bytes [properties_file]`); 4.2 (KIP-1172) added named ones
//! (`--bootstrap-server --topic --num-records --producer-acks --record-size [--command-config]`) and
//! still takes the positional form. Checked in Kafka 4.2's order and refused in its words.

use clap::Args;
use kbench_client::Acks;

/// Kafka's words when no argument was given (its tool then prints its usage).
const ABOUT: &str = "This tool measures end-to-end latency in Kafka by sending messages and timing their reception.";

/// The positional form, as Kafka 4.2 names its arguments in its refusal.
const POSITIONAL_USAGE: &str =
    "bootstrap-server topic num-records producer-acks record-size [optional] command-config";

#[derive(Debug, Args, Default)]
pub struct E2eLatencyArgs {
    /// Kafka 3.x's positional form: broker_list topic num_messages producer_acks
    /// message_size_bytes [properties_file]. Not with the named arguments.
    #[arg(value_name = "ARG", allow_negative_numbers = true)]
    pub positional: Vec<String>,

    /// REQUIRED (or positional): the Kafka broker list, HOST1:PORT1,HOST2:PORT2.
    #[arg(long)]
    pub bootstrap_server: Option<String>,

    /// REQUIRED: the topic (created with 1 partition and replication factor 1 when missing).
    #[arg(long)]
    pub topic: Option<String>,

    /// REQUIRED: the number of records to send, one at a time.
    #[arg(long, allow_negative_numbers = true, value_name = "COUNT")]
    pub num_records: Option<String>,

    /// REQUIRED: the producer's acks, 1 or all.
    #[arg(long, allow_negative_numbers = true)]
    pub producer_acks: Option<String>,

    /// REQUIRED: each record's value size in bytes.
    #[arg(long, allow_negative_numbers = true, value_name = "BYTES")]
    pub record_size: Option<String>,

    /// Kafka 4.2's key size; kbench's records carry their own 16-byte key, so only 0 (the default).
    #[arg(long, allow_negative_numbers = true, value_name = "BYTES")]
    pub record_key_size: Option<String>,

    /// Kafka 4.2's header count; kbench's records carry their own send-time header, so only 0.
    #[arg(long, allow_negative_numbers = true, value_name = "COUNT")]
    pub num_headers: Option<String>,

    /// Kafka 4.2's header key size (used with --num-headers; checked, no effect at 0 headers).
    #[arg(long, allow_negative_numbers = true, value_name = "BYTES")]
    pub record_header_key_size: Option<String>,

    /// Kafka 4.2's header value size, -1 for null (checked, no effect at 0 headers).
    #[arg(long, allow_negative_numbers = true, value_name = "BYTES")]
    pub record_header_size: Option<String>,

    /// `--command-config FILE` (the positional form's properties_file) and `-X KEY=VALUE`.
    #[command(flatten)]
    pub connection: crate::args::ConnectionArgs,

    #[command(flatten)]
    pub output: crate::args::OutputArgs,
}

/// What the arguments ask for, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    pub bootstrap: String,
    pub topic: String,
    pub records: u64,
    pub acks: Acks,
    pub record_size: usize,
}

/// The named form's five required arguments, by the name Kafka's refusal gives each.
struct Required {
    bootstrap: Option<String>,
    topic: Option<String>,
    records: Option<String>,
    acks: Option<String>,
    size: Option<String>,
}

/// The arguments, checked as Kafka 4.2 checks them; an error is Kafka's sentence when it has one.
/// A positional properties file is added to `connection`'s `--command-config` files.
pub fn invocation(args: &mut E2eLatencyArgs) -> Result<Invocation, String> {
    let named = args.bootstrap_server.is_some()
        || args.topic.is_some()
        || args.num_records.is_some()
        || args.producer_acks.is_some()
        || args.record_size.is_some();
    let required = if named {
        if let Some(extra) = args.positional.first() {
            return Err(format!(
                "{extra:?}: positional arguments are not taken with the named ones (--bootstrap-server, --topic, --num-records, --producer-acks, --record-size)"
            ));
        }
        Required {
            bootstrap: args.bootstrap_server.clone(),
            topic: args.topic.clone(),
            records: args.num_records.clone(),
            acks: args.producer_acks.clone(),
            size: args.record_size.clone(),
        }
    } else {
        positional(args)?
    };
    check(required, args)
}

/// The positional form: five arguments, or six with a properties file (blank: none).
fn positional(args: &mut E2eLatencyArgs) -> Result<Required, String> {
    let p = &args.positional;
    match p.len() {
        0 => {
            return Err(format!(
                "{ABOUT} Give --bootstrap-server, --topic, --num-records, --producer-acks and --record-size, or positionally: {POSITIONAL_USAGE}"
            ));
        }
        5 | 6 => {}
        n => {
            return Err(format!(
                "Invalid number of arguments. Expected 5 or 6 positional arguments, but got {n}. Usage: {POSITIONAL_USAGE}"
            ));
        }
    }
    if let Some(file) = p.get(5).filter(|f| !f.trim().is_empty()) {
        args.connection.command_config.insert(0, file.into());
    }
    Ok(Required {
        bootstrap: Some(p[0].clone()),
        topic: Some(p[1].clone()),
        records: Some(p[2].clone()),
        acks: Some(p[3].clone()),
        size: Some(p[4].clone()),
    })
}

/// Kafka's checks, in its order: the required arguments, acks, the counts and sizes.
fn check(r: Required, args: &E2eLatencyArgs) -> Result<Invocation, String> {
    let missing = |name: &str| format!("Missing required argument \"[{name}]\"");
    let bootstrap = r.bootstrap.ok_or_else(|| missing("bootstrap-server"))?;
    let topic = r.topic.ok_or_else(|| missing("topic"))?;
    let records = r.records.ok_or_else(|| missing("num-records"))?;
    let acks = r.acks.ok_or_else(|| missing("producer-acks"))?;
    let size = r.size.ok_or_else(|| missing("record-size"))?;
    // Exactly these two spellings, as Kafka compares them.
    let acks = match acks.as_str() {
        "1" => Acks::Leader,
        "all" => Acks::All,
        _ => {
            return Err("Invalid value for --producer-acks. Latency testing requires synchronous acknowledgement. Please use '1' or 'all'.".into());
        }
    };
    let records = int("num-records", &records)?;
    if records <= 0 {
        return Err("Value for --num-records must be a positive integer.".into());
    }
    let size = int("record-size", &size)?;
    if size < 0 {
        return Err("Value for --record-size must be a non-negative integer.".into());
    }
    let optional = |name: &str, v: &Option<String>, least: i32, words: &str| {
        let n = v.as_deref().map_or(Ok(0), |v| int(name, v))?;
        if n < least {
            return Err(format!("Value for --{name} must be {words}."));
        }
        Ok(n)
    };
    let nonneg = "a non-negative integer";
    let key_size = optional("record-key-size", &args.record_key_size, 0, nonneg)?;
    optional(
        "record-header-key-size",
        &args.record_header_key_size,
        0,
        nonneg,
    )?;
    optional(
        "record-header-size",
        &args.record_header_size,
        -1,
        "a non-negative integer or -1 for null header value",
    )?;
    let headers = optional("num-headers", &args.num_headers, 0, nonneg)?;
    // What kbench's e2e records cannot be.
    if key_size != 0 {
        return Err("--record-key-size: kbench's e2e records carry their own 16-byte key (the record's id); only 0".into());
    }
    if headers != 0 {
        return Err(
            "--num-headers: kbench's e2e records carry their own send-time header; only 0".into(),
        );
    }
    if size == 0 {
        return Err("--record-size 0: kbench's e2e records need a value of 1 byte or more".into());
    }
    Ok(Invocation {
        bootstrap,
        topic,
        records: records as u64,
        acks,
        record_size: size as usize,
    })
}

/// A Java `int`, or Kafka's (joptsimple's) refusal naming the option.
fn int(option: &str, v: &str) -> Result<i32, String> {
    v.parse()
        .map_err(|_| format!("Cannot parse argument '{v}' of option {option}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn positional(args: &[&str]) -> E2eLatencyArgs {
        E2eLatencyArgs {
            positional: args.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn the_positional_form_maps_onto_the_named_one() {
        let mut a = positional(&["h:9092", "t", "10000", "all", "20", "client.properties"]);
        let inv = invocation(&mut a).unwrap();
        assert_eq!(
            inv,
            Invocation {
                bootstrap: "h:9092".into(),
                topic: "t".into(),
                records: 10000,
                acks: Acks::All,
                record_size: 20,
            }
        );
        assert_eq!(
            a.connection.command_config,
            vec![std::path::PathBuf::from("client.properties")]
        );
        // A blank properties file is none.
        let mut a = positional(&["h:9092", "t", "1", "1", "20", " "]);
        invocation(&mut a).unwrap();
        assert!(a.connection.command_config.is_empty());
    }

    #[test]
    fn bad_input_is_refused_in_kafkas_words() {
        let cases: [(&[&str], &str); 6] = [
            (
                &["h", "t", "10", "0", "20"],
                "Invalid value for --producer-acks.",
            ),
            (
                &["h", "t", "ten", "1", "20"],
                "Cannot parse argument 'ten' of option num-records",
            ),
            (
                &["h", "t", "0", "1", "20"],
                "Value for --num-records must be a positive integer.",
            ),
            (
                &["h", "t", "5", "1", "-1"],
                "Value for --record-size must be a non-negative integer.",
            ),
            (
                &["h", "t", "5", "1"],
                "Expected 5 or 6 positional arguments, but got 4.",
            ),
            (&[], "This tool measures end-to-end latency"),
        ];
        for (args, says) in cases {
            let e = invocation(&mut positional(args)).unwrap_err();
            assert!(e.contains(says), "{args:?}: {e}");
        }
        let mut named = E2eLatencyArgs {
            bootstrap_server: Some("h".into()),
            topic: Some("t".into()),
            producer_acks: Some("1".into()),
            record_size: Some("5".into()),
            ..Default::default()
        };
        assert_eq!(
            invocation(&mut named).unwrap_err(),
            "Missing required argument \"[num-records]\""
        );
        named.num_records = Some("3".into());
        named.record_header_size = Some("-2".into());
        assert!(
            invocation(&mut named)
                .unwrap_err()
                .contains("or -1 for null header value")
        );
        named.record_header_size = Some("-1".into());
        assert_eq!(invocation(&mut named).unwrap().records, 3);
        named.positional = vec!["x".into()];
        assert!(
            invocation(&mut named)
                .unwrap_err()
                .contains("not taken with the named ones")
        );
    }
}
