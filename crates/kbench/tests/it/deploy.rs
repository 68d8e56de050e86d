//! The deployment files under deploy/: every Kubernetes manifest parses into its typed object
//! (k8s-openapi, the API's own schema), and the wiring holds — the kustomization lists every
//! manifest, the headless Service selects the agents' pods and its port is theirs, the coordinator
//! finds the agents by the Service's DNS name and port and waits for as many as the Job runs, every
//! variable its command line uses is in the workload ConfigMap, both Jobs run the one image the
//! kustomization sets and share the token Secret it generates, and the Dockerfile installs the
//! binary where the coordinator's shell finds it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Container, PersistentVolumeClaim, Service};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

fn deploy() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

fn read(name: &str) -> String {
    std::fs::read_to_string(deploy().join("kubernetes").join(name))
        .unwrap_or_else(|e| panic!("deploy/kubernetes/{name}: {e}"))
}

fn parse<T: serde::de::DeserializeOwned>(name: &str) -> T {
    serde_yaml_ng::from_str(&read(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn container(job: &Job) -> &Container {
    let spec = job.spec.as_ref().expect("job spec");
    let pod = spec.template.spec.as_ref().expect("pod spec");
    assert_eq!(pod.containers.len(), 1, "one container");
    &pod.containers[0]
}

fn pod_labels(job: &Job) -> BTreeMap<String, String> {
    job.spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .expect("pod labels")
}

/// The `$(VAR)` references in a string (Kubernetes expands them from the container's env).
fn references(s: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = s;
    while let Some(at) = rest.find("$(") {
        let tail = &rest[at + 2..];
        let end = tail.find(')').expect("closed $(");
        out.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    out
}

/// The value after `flag` in an argument list.
fn flag_value<'a>(args: &'a [String], flag: &str) -> &'a str {
    let i = args
        .iter()
        .position(|a| a == flag)
        .unwrap_or_else(|| panic!("{flag} in {args:?}"));
    &args[i + 1]
}

/// The Secret a container's env var comes from: (name, key).
fn secret_of(c: &Container, var: &str) -> (String, String) {
    let env = c.env.as_ref().expect("env");
    let r = env
        .iter()
        .find(|e| e.name == var)
        .and_then(|e| e.value_from.as_ref())
        .and_then(|v| v.secret_key_ref.as_ref())
        .unwrap_or_else(|| panic!("{var} from a Secret"));
    (r.name.clone(), r.key.clone())
}

#[test]
fn every_manifest_parses_and_the_wiring_holds() {
    let kustomization: Value = serde_yaml_ng::from_str(&read("kustomization.yaml")).unwrap();
    // Every manifest is listed, and every listed file is there.
    let listed: BTreeSet<String> = kustomization["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    let present: BTreeSet<String> = std::fs::read_dir(deploy().join("kubernetes"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
        .collect();
    assert_eq!(listed, present);

    let service: Service = parse("agents-service.yaml");
    let agents: Job = parse("agents-job.yaml");
    let coordinator: Job = parse("coordinator-job.yaml");
    let workload: ConfigMap = parse("workload.yaml");
    let pvc: PersistentVolumeClaim = parse("results-pvc.yaml");

    // The headless Service selects the agents' pods, and its port is the agents'.
    let svc = service.spec.as_ref().unwrap();
    assert_eq!(svc.cluster_ip.as_deref(), Some("None"), "headless");
    let selector = svc.selector.as_ref().unwrap();
    let labels = pod_labels(&agents);
    for (k, v) in selector {
        assert_eq!(labels.get(k), Some(v), "selector {k}={v} on the agent pods");
    }
    let coordinator_labels = pod_labels(&coordinator);
    assert!(
        !selector
            .iter()
            .all(|(k, v)| coordinator_labels.get(k) == Some(v)),
        "the Service must not select the coordinator"
    );
    let port = &svc.ports.as_ref().unwrap()[0];
    let agent = container(&agents);
    let agent_port = &agent.ports.as_ref().unwrap()[0];
    assert_eq!(
        port.target_port,
        Some(IntOrString::String(agent_port.name.clone().unwrap()))
    );
    let agent_args = agent.args.clone().unwrap();
    assert_eq!(agent_args[0], "agent");
    let listen = flag_value(&agent_args, "--listen");
    assert_eq!(listen, format!("0.0.0.0:{}", agent_port.container_port));
    assert_eq!(flag_value(&agent_args, "--exit-after-segments"), "1");
    let agents_pod = agents
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap();
    assert_eq!(
        agents_pod.subdomain.as_deref(),
        service.metadata.name.as_deref()
    );
    assert_eq!(agents_pod.restart_policy.as_deref(), Some("Never"));

    // The agents: an Indexed Job of AGENTS pods, all at once.
    let job = agents.spec.as_ref().unwrap();
    assert_eq!(job.completion_mode.as_deref(), Some("Indexed"));
    let data = workload.data.as_ref().unwrap();
    let count: i32 = data["AGENTS"].parse().unwrap();
    assert_eq!(job.completions, Some(count));
    assert_eq!(job.parallelism, Some(count));

    // The coordinator finds them by the Service's name and port, and waits for all of them.
    let coord = container(&coordinator);
    let line = coord.args.as_ref().unwrap().join(" ");
    let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    assert_eq!(
        flag_value(&words, "--agents-dns"),
        format!(
            "{}:{}",
            service.metadata.name.as_deref().unwrap(),
            port.port
        )
    );
    assert_eq!(flag_value(&words, "--agents-count"), "$(AGENTS)");
    assert_eq!(
        coord.command.as_deref(),
        Some(&["/bin/sh".to_string(), "-c".to_string()][..])
    );
    assert!(words[0] == "kbench", "{line}");
    // Every $(VAR) it uses comes from the workload ConfigMap it loads.
    let from = coord.env_from.as_ref().unwrap()[0]
        .config_map_ref
        .as_ref()
        .unwrap();
    assert_eq!(Some(&from.name), workload.metadata.name.as_ref());
    for var in references(&line) {
        assert!(data.contains_key(&var), "$({var}) is not in the ConfigMap");
    }
    assert!(["e2e", "produce"].contains(&data["WORKLOAD"].as_str()));
    // The result lands on the volume, which is the claim.
    let json = flag_value(&words, "--json");
    let mount = &coord.volume_mounts.as_ref().unwrap()[0];
    assert!(
        json.starts_with(&format!("{}/", mount.mount_path)),
        "{json}"
    );
    let volumes = coordinator
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .volumes
        .clone()
        .unwrap();
    let claim = volumes
        .iter()
        .find(|v| v.name == mount.name)
        .and_then(|v| v.persistent_volume_claim.as_ref())
        .unwrap();
    assert_eq!(Some(&claim.claim_name), pvc.metadata.name.as_ref());

    // One image, set once in the kustomization.
    let image = kustomization["images"][0]["name"].as_str().unwrap();
    assert_eq!(agent.image.as_deref(), Some(image));
    assert_eq!(coord.image.as_deref(), Some(image));
    // One token Secret, generated by the kustomization, read by both sides.
    let secret = kustomization["secretGenerator"][0]["name"]
        .as_str()
        .unwrap();
    let key = kustomization["secretGenerator"][0]["literals"][0]
        .as_str()
        .unwrap()
        .split('=')
        .next()
        .unwrap();
    let expected = (secret.to_string(), key.to_string());
    assert_eq!(secret_of(agent, "KBENCH_TOKEN"), expected);
    assert_eq!(secret_of(coord, "KBENCH_AGENT_TOKEN"), expected);
    assert_eq!(
        kustomization["generatorOptions"]["disableNameSuffixHash"],
        Value::Bool(true),
        "the Jobs name the Secret as generated"
    );
}

/// The Dockerfile is read, not built (no image builder runs in the suite): two stages, the release
/// build of kbench, the binary copied to the path on which the manifests run it, and the entrypoint.
#[test]
fn the_dockerfile_names_the_binary_and_entrypoint_the_manifests_run() {
    let text = std::fs::read_to_string(deploy().join("Dockerfile")).unwrap();
    let froms: Vec<&str> = text.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(froms.len(), 2, "multi-stage: build, then run");
    assert!(froms[0].ends_with(" AS build"), "{}", froms[0]);
    assert!(text.contains("cargo build --release --locked -p kbench"));
    let copy = text
        .lines()
        .find(|l| l.starts_with("COPY --from=build"))
        .expect("the binary copied from the build stage");
    assert!(
        copy.contains("/target/release/kbench /usr/local/bin/kbench"),
        "{copy}"
    );
    assert!(text.contains(r#"ENTRYPOINT ["kbench"]"#));
    // The agents' args follow the entrypoint; the coordinator's shell finds kbench on PATH.
    let agents: Job = parse("agents-job.yaml");
    assert!(container(&agents).command.is_none());
}
