//! The health server over real TCP on an ephemeral port: liveness,
//! readiness before and after the flag, methods and paths, and `/metrics`
//! parsed as the Prometheus text format with every registered family.

use crate::support_ops as support;

use std::net::SocketAddr;
use std::time::Duration;

use bind_operator::operator::health::HealthServer;
use bind_operator::operator::{Controller, Metrics, Readiness};
use bind_operator::telemetry::metrics::CONTENT_TYPE;
use http::{Method, StatusCode};
use support::{get, promtext, request, within};
use tokio_util::sync::CancellationToken;

async fn start(readiness: Readiness, metrics: Metrics) -> (SocketAddr, CancellationToken) {
    let server = HealthServer::bind("127.0.0.1:0".parse().unwrap(), readiness, metrics)
        .await
        .unwrap();
    let addr = server.local_addr();
    assert_ne!(addr.port(), 0);
    let stop = CancellationToken::new();
    tokio::spawn(server.serve(stop.clone()));
    (addr, stop)
}

#[tokio::test]
async fn probes_answer_with_the_right_codes_before_and_after_readiness() {
    let readiness = Readiness::new();
    let (addr, stop) = start(readiness.clone(), Metrics::new()).await;

    let live = get(addr, "/healthz").await;
    assert_eq!(live.status, StatusCode::OK);
    assert_eq!(live.body, "ok\n");
    let ready = get(addr, "/readyz").await;
    assert_eq!(ready.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(ready.body, "not ready\n");

    readiness.set_ready(true);
    assert_eq!(get(addr, "/readyz").await.status, StatusCode::OK);
    assert_eq!(get(addr, "/healthz").await.status, StatusCode::OK);

    readiness.set_ready(false);
    assert_eq!(
        get(addr, "/readyz").await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    // Liveness does not follow readiness.
    assert_eq!(get(addr, "/healthz").await.status, StatusCode::OK);
    stop.cancel();
}

#[tokio::test]
async fn other_paths_and_methods_are_refused() {
    let (addr, stop) = start(Readiness::new(), Metrics::new()).await;
    assert_eq!(get(addr, "/").await.status, StatusCode::NOT_FOUND);
    assert_eq!(get(addr, "/healthz/x").await.status, StatusCode::NOT_FOUND);
    let post = within("POST", request(addr, Method::POST, "/healthz"))
        .await
        .unwrap();
    assert_eq!(post.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(post.headers[http::header::ALLOW], "GET, HEAD");
    let head = within("HEAD", request(addr, Method::HEAD, "/healthz"))
        .await
        .unwrap();
    assert_eq!(head.status, StatusCode::OK);
    assert_eq!(head.body, "");
    // A query string does not change the route (kubelets may add none, but
    // scrapers sometimes do).
    assert_eq!(get(addr, "/healthz?verbose").await.status, StatusCode::OK);
    stop.cancel();
}

#[tokio::test]
async fn metrics_parse_as_prometheus_text_with_every_family() {
    let metrics = Metrics::new();
    let (addr, stop) = start(Readiness::new(), metrics.clone()).await;

    // Before anything happened: the per-controller series and the leader
    // gauge start at zero. Families keyed by error category or exec verb
    // have no series yet, and the text format omits empty families.
    let resp = get(addr, "/metrics").await;
    assert_eq!(resp.status, StatusCode::OK);
    assert_eq!(resp.headers[http::header::CONTENT_TYPE], CONTENT_TYPE);
    assert!(CONTENT_TYPE.starts_with("text/plain; version=0.0.4"));
    let families = promtext::parse(&resp.body).unwrap_or_else(|e| panic!("{e}\n{}", resp.body));
    let names: Vec<&str> = families.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "bind_operator_leader",
            "bind_operator_reconcile_duration_seconds",
            "bind_operator_reconciliations_total",
        ]
    );
    let reconciles = &families["bind_operator_reconciliations_total"];
    for c in ["BindCluster", "BindZone", "DNSRecord", "BindTSIGKey"] {
        assert_eq!(
            reconciles.value("bind_operator_reconciliations_total", &[("controller", c)]),
            Some(0.0),
            "{c}"
        );
    }
    assert_eq!(
        families["bind_operator_leader"].value("bind_operator_leader", &[]),
        Some(0.0)
    );

    // What the reconcilers and the executor will record.
    metrics.reconcile(Controller::BindZone, Duration::from_millis(30), None);
    metrics.reconcile(
        Controller::BindZone,
        Duration::from_millis(70),
        Some("bind_exec"),
    );
    metrics.reconcile(Controller::DNSRecord, Duration::from_secs(60), None);
    metrics.exec("reconfig", true);
    metrics.exec("reconfig", true);
    metrics.exec("nsupdate", false);
    metrics.set_leader(true);

    let resp = get(addr, "/metrics").await;
    let families = promtext::parse(&resp.body).unwrap_or_else(|e| panic!("{e}\n{}", resp.body));
    let expected = [
        ("bind_operator_reconciliations_total", "counter"),
        ("bind_operator_reconcile_errors_total", "counter"),
        ("bind_operator_reconcile_duration_seconds", "histogram"),
        ("bind_operator_exec_calls_total", "counter"),
        ("bind_operator_exec_errors_total", "counter"),
        ("bind_operator_leader", "gauge"),
    ];
    for (name, kind) in expected {
        let fam = families
            .get(name)
            .unwrap_or_else(|| panic!("{name} missing from\n{}", resp.body));
        assert_eq!(fam.kind, kind, "{name}");
        assert!(fam.help.as_deref().is_some_and(|h| !h.is_empty()), "{name}");
    }
    assert_eq!(families.len(), expected.len(), "{}", resp.body);
    let value = |fam: &str, series: &str, labels: &[(&str, &str)]| {
        families[fam]
            .value(series, labels)
            .unwrap_or_else(|| panic!("{series}{labels:?} missing from\n{}", resp.body))
    };
    let total = "bind_operator_reconciliations_total";
    assert_eq!(value(total, total, &[("controller", "BindZone")]), 2.0);
    assert_eq!(value(total, total, &[("controller", "DNSRecord")]), 1.0);
    assert_eq!(value(total, total, &[("controller", "BindCluster")]), 0.0);
    let errors = "bind_operator_reconcile_errors_total";
    assert_eq!(
        value(
            errors,
            errors,
            &[("controller", "BindZone"), ("category", "bind_exec")]
        ),
        1.0
    );
    assert_eq!(families[errors].samples.len(), 1);
    let hist = "bind_operator_reconcile_duration_seconds";
    let zone = [("controller", "BindZone")];
    assert_eq!(value(hist, &format!("{hist}_count"), &zone), 2.0);
    assert!((value(hist, &format!("{hist}_sum"), &zone) - 0.1).abs() < 1e-9);
    let bucket = |le: &str| {
        value(
            hist,
            &format!("{hist}_bucket"),
            &[("controller", "BindZone"), ("le", le)],
        )
    };
    assert_eq!(bucket("0.04"), 1.0, "30ms lands at or below 40ms");
    assert_eq!(bucket("0.08"), 2.0);
    // A minute is beyond the last finite bucket.
    let record = [("controller", "DNSRecord"), ("le", "+Inf")];
    assert_eq!(value(hist, &format!("{hist}_bucket"), &record), 1.0);
    let calls = "bind_operator_exec_calls_total";
    assert_eq!(value(calls, calls, &[("verb", "reconfig")]), 2.0);
    assert_eq!(value(calls, calls, &[("verb", "nsupdate")]), 1.0);
    let failed = "bind_operator_exec_errors_total";
    assert_eq!(value(failed, failed, &[("verb", "nsupdate")]), 1.0);
    assert_eq!(families[failed].samples.len(), 1);
    assert_eq!(
        value("bind_operator_leader", "bind_operator_leader", &[]),
        1.0
    );
    stop.cancel();
}

#[test]
fn the_exposition_parser_rejects_malformed_text() {
    let good = "# HELP x_total Things.\n# TYPE x_total counter\nx_total{a=\"1\"} 3\n";
    promtext::parse(good).unwrap();
    let bad = [
        "x_total 3\n",                                      // no TYPE
        "# TYPE x_total counter\nx_total{a=1} 3\n",         // unquoted
        "# TYPE x_total counter\nx_total{a=\"1\"} three\n", // value
        "# TYPE x_total counter\nx_total 3",                // no newline
        "# TYPE x gauge\n# TYPE y gauge\ny 1\nx 2\n",       // interleaved
        "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n",
        "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 1\n",
        "# TYPE 1x gauge\n1x 1\n",
    ];
    for text in bad {
        assert!(promtext::parse(text).is_err(), "accepted {text:?}");
    }
}

#[tokio::test]
async fn shutdown_stops_answering_and_a_taken_port_is_an_error() {
    let (addr, stop) = start(Readiness::new(), Metrics::new()).await;
    assert_eq!(get(addr, "/healthz").await.status, StatusCode::OK);

    let e = HealthServer::bind(addr, Readiness::new(), Metrics::new())
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("failed to listen for health checks on {addr}")),
        "{e}"
    );

    stop.cancel();
    support::eventually("the listener to close", || {
        std::net::TcpStream::connect(addr).is_err()
    })
    .await;
}
