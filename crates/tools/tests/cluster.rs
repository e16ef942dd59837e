//! `strom cluster config`, run as the real binary: the files it writes and
//! the arguments it refuses. `strom cluster up`, which starts the nodes, is
//! not run here: these tests start no process but `strom` itself.

use crate::common;

use common::run_strom;

#[test]
fn config_writes_every_node_and_keeps_them_on_a_second_run() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = dir.path().join("cluster");
    let cluster_arg = cluster.display().to_string();
    let args = [
        "cluster",
        "config",
        "--nodes",
        "4",
        "--controllers",
        "3",
        "--base-port",
        "39092",
        "--dir",
        cluster_arg.as_str(),
    ];
    let first = run_strom(&args, "").ok();
    assert_eq!(first.matches("Wrote ").count(), 4, "{first}");
    assert!(
        first.contains(
            "Bootstrap servers: 127.0.0.1:39092,127.0.0.1:39093,127.0.0.1:39094,127.0.0.1:39095"
        ),
        "{first}"
    );
    assert!(first.contains("CONTROLLER 127.0.0.1:39194"), "{first}");
    let fourth = std::fs::read_to_string(cluster.join("node-4/server.properties")).unwrap();
    assert!(fourth.contains("process.roles=broker\n"), "{fourth}");
    assert!(
        fourth.contains(
            "controller.quorum.voters=1@127.0.0.1:39192,2@127.0.0.1:39193,3@127.0.0.1:39194\n"
        ),
        "{fourth}"
    );

    let second = run_strom(&args, "").ok();
    assert_eq!(second.matches("Kept ").count(), 4, "{second}");
    let cluster_id = |text: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix("Cluster id: "))
            .map(str::to_owned)
    };
    assert_eq!(cluster_id(&first), cluster_id(&second));

    run_strom(
        &[
            "cluster",
            "config",
            "--nodes",
            "3",
            "--dir",
            cluster_arg.as_str(),
        ],
        "",
    )
    .fails_with(2, "holds the files of 4 node(s)");
}

#[test]
fn bad_shapes_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().display().to_string();
    run_strom(&["cluster", "config", "--nodes", "10", "--dir", &path], "").fails_with(2, "--nodes");
    run_strom(
        &[
            "cluster",
            "config",
            "--nodes",
            "3",
            "--controllers",
            "2",
            "--dir",
            &path,
        ],
        "",
    )
    .fails_with(2, "1, 3 or 5");
    run_strom(&["cluster", "up", "--nodes", "3"], "").fails_with(2, "--dir");
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "nothing was written"
    );
}
