//! Every category a BindCluster or BindTSIGKey reconcile can write into a
//! condition (its permanent errors) is in the one list of condition reasons
//! (`api::CONDITION_REASONS`) as a terminal failure, and no transient
//! category is: the local report's verdict depends on it.

use bind_operator::api::{ReasonKind, is_terminal_failure, reason_kind};
use bind_operator::controller::Categorized;
use bind_operator::controller::bindcluster::Error as ClusterError;
use bind_operator::controller::bindtsigkey::Error as KeyError;
use bind_operator::controller::bindtsigkey::material::MaterialError;
use bind_operator::render::validate::ConfigError;
use kube::core::Status;

fn s(text: &str) -> String {
    text.to_string()
}

fn material_errors() -> Vec<MaterialError> {
    vec![
        MaterialError::SecretNotFound {
            key: s("k"),
            secret: s("s"),
        },
        MaterialError::SecretNotGenerated {
            key: s("k"),
            secret: s("s"),
        },
        MaterialError::SecretKeyMissing {
            key: s("k"),
            secret: s("s"),
            data_key: s("tsig"),
        },
        MaterialError::InvalidSecret {
            key: s("k"),
            secret: s("s"),
            data_key: s("tsig"),
        },
        MaterialError::InvalidKeyName {
            key: s("k"),
            reason: s("bad"),
        },
        MaterialError::Kube {
            key: s("k"),
            secret: s("s"),
            source: api_error(500),
        },
    ]
}

fn api_error(code: u16) -> kube::Error {
    kube::Error::Api(Status::failure("nope", "Invalid").with_code(code).boxed())
}

fn check<E: Categorized>(errors: Vec<E>) -> usize {
    let mut permanent = 0;
    for e in errors {
        let category = e.category();
        if e.is_transient() {
            assert_ne!(
                reason_kind(category),
                Some(ReasonKind::Failed),
                "transient {category} listed as a terminal failure"
            );
        } else {
            permanent += 1;
            assert!(
                is_terminal_failure(category),
                "{category} (from {e}) is not in api::CONDITION_REASONS as a failure"
            );
        }
    }
    permanent
}

#[test]
fn every_permanent_category_is_a_listed_terminal_failure() {
    let mut cluster: Vec<ClusterError> = vec![
        ClusterError::InvalidSpec {
            message: s("bad forwarder"),
        },
        ClusterError::Config(ConfigError::NoTransferKey(s("ns/c"))),
        ClusterError::RndcSecretInvalid {
            secret: s("c-rndc"),
        },
        ClusterError::TransferSecretInvalid {
            secret: s("c-transfer"),
        },
        ClusterError::Kube {
            action: "apply",
            object: s("statefulset c"),
            source: api_error(422),
        },
        ClusterError::Kube {
            action: "apply",
            object: s("statefulset c"),
            source: api_error(500),
        },
    ];
    cluster.extend(material_errors().into_iter().map(ClusterError::Key));
    assert_eq!(check(cluster), 9);

    let mut key: Vec<KeyError> = vec![KeyError::SecretConflict {
        key: s("k"),
        secret: s("k-tsig"),
    }];
    key.extend(material_errors().into_iter().map(KeyError::Material));
    assert_eq!(check(key), 5);
}

#[test]
fn the_status_reasons_of_a_healthy_or_moving_cluster_are_not_failures() {
    use bind_operator::api::*;
    for done in [REASON_APPLIED, REASON_READY, REASON_KEY_AVAILABLE] {
        assert_eq!(reason_kind(done), Some(ReasonKind::Done), "{done}");
    }
    for moving in [
        REASON_PROPAGATING,
        REASON_PODS_NOT_READY,
        REASON_CONFIG_NOT_APPLIED,
    ] {
        assert_eq!(
            reason_kind(moving),
            Some(ReasonKind::InProgress),
            "{moving}"
        );
    }
    for failed in [REASON_RECONFIG_FAILED, REASON_EXEC_FAILED] {
        assert!(is_terminal_failure(failed), "{failed}");
    }
}
