//! Request routing: turns the URL path and query string kube produces into a
//! route (discovery document or resource target) and typed query options.
//! Pure parsing, no state.

use std::collections::BTreeMap;

use super::registry::{Registry, ResourceInfo};
use super::status::ApiError;

/// Where a request goes.
#[derive(Debug)]
pub(crate) enum Route {
    Version,
    /// `/api`
    CoreGroup,
    /// `/apis`
    Groups,
    /// `/api/v1` or `/apis/G/V`
    GroupVersion(String, String),
    Resource(Target),
}

/// A resource collection, object or subresource.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    pub(crate) info: ResourceInfo,
    /// Set for namespaced paths; `None` for cluster-scoped kinds and for
    /// all-namespace lists and watches.
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
    /// Only `status` is served.
    pub(crate) status: bool,
}

pub(crate) fn route(path: &str, registry: &Registry) -> Result<Route, ApiError> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Ok(Route::Version),
        ["api"] => return Ok(Route::CoreGroup),
        ["apis"] => return Ok(Route::Groups),
        ["api", v] => return Ok(Route::GroupVersion(String::new(), (*v).to_owned())),
        ["apis", g, v] => return Ok(Route::GroupVersion((*g).to_owned(), (*v).to_owned())),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(ApiError::path_not_found()),
    };
    let lookup = |plural: &str| registry.get(group, version, plural).cloned();
    // `namespaces/NS/PLURAL...` addresses a namespaced kind; otherwise
    // `namespaces/NAME[/status]` is the Namespace object itself.
    let namespaced = match rest {
        ["namespaces", ns, plural, tail @ ..] => lookup(plural)
            .filter(|i| i.namespaced)
            .map(|i| (i, Some((*ns).to_owned()), tail)),
        _ => None,
    };
    let (info, namespace, tail) = match namespaced {
        Some(found) => found,
        None => match rest {
            [plural, tail @ ..] => {
                let info = lookup(plural).ok_or_else(ApiError::path_not_found)?;
                (info, None, tail)
            }
            [] => return Err(ApiError::path_not_found()),
        },
    };
    let (name, status) = match tail {
        [] => (None, false),
        [name] => (Some((*name).to_owned()), false),
        [name, "status"] if info.status_subresource => (Some((*name).to_owned()), true),
        _ => return Err(ApiError::path_not_found()),
    };
    if info.namespaced && namespace.is_none() && name.is_some() {
        return Err(ApiError::path_not_found());
    }
    Ok(Route::Resource(Target {
        info,
        namespace,
        name,
        status,
    }))
}

/// The query parameters the handlers understand; others are ignored.
#[derive(Debug, Default)]
pub(crate) struct Query {
    pub(crate) watch: bool,
    pub(crate) resource_version: Option<String>,
    pub(crate) label_selector: Option<String>,
    pub(crate) field_selector: Option<String>,
    pub(crate) limit: Option<usize>,
    pub(crate) continue_token: Option<String>,
    pub(crate) timeout_seconds: Option<u64>,
    pub(crate) allow_bookmarks: bool,
    pub(crate) send_initial_events: bool,
    pub(crate) field_manager: Option<String>,
    pub(crate) force: bool,
    pub(crate) dry_run: bool,
}

impl Query {
    pub(crate) fn parse(raw: Option<&str>) -> Result<Self, ApiError> {
        let mut pairs = BTreeMap::new();
        for part in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            pairs.insert(decode(k)?, decode(v)?);
        }
        let flag = |k: &str| pairs.get(k).is_some_and(|v| v == "true" || v == "1");
        let text = |k: &str| pairs.get(k).filter(|v| !v.is_empty()).cloned();
        let number = |k: &str| -> Result<Option<u64>, ApiError> {
            text(k)
                .map(|v| {
                    v.parse()
                        .map_err(|_| ApiError::bad_request(format!("invalid {k}: {v}")))
                })
                .transpose()
        };
        Ok(Self {
            watch: flag("watch"),
            resource_version: text("resourceVersion"),
            label_selector: text("labelSelector"),
            field_selector: text("fieldSelector"),
            limit: number("limit")?.map(|n| n as usize).filter(|n| *n > 0),
            continue_token: text("continue"),
            timeout_seconds: number("timeoutSeconds")?,
            allow_bookmarks: flag("allowWatchBookmarks"),
            send_initial_events: flag("sendInitialEvents"),
            field_manager: text("fieldManager"),
            force: flag("force"),
            dry_run: pairs.contains_key("dryRun"),
        })
    }
}

/// Percent-decoding as in `application/x-www-form-urlencoded`.
fn decode(s: &str) -> Result<String, ApiError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = s
                    .get(i + 1..i + 3)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| ApiError::bad_request("malformed query string"))?;
                out.push(hex);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| ApiError::bad_request("malformed query string"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(path: &str) -> Target {
        match route(path, &Registry::with_builtins()).unwrap() {
            Route::Resource(t) => t,
            other => panic!("not a resource route: {other:?}"),
        }
    }

    #[test]
    fn routes_namespaced_cluster_and_status_paths() {
        let t = target("/api/v1/namespaces/ns1/configmaps/cm");
        assert_eq!(
            (
                t.info.plural.as_str(),
                t.namespace.as_deref(),
                t.name.as_deref()
            ),
            ("configmaps", Some("ns1"), Some("cm"))
        );
        let t = target("/api/v1/namespaces/ns1");
        assert_eq!(
            (t.info.kind.as_str(), t.name.as_deref()),
            ("Namespace", Some("ns1"))
        );
        let t = target("/api/v1/namespaces/ns1/status");
        assert!(t.status && t.info.kind == "Namespace");
        let t = target("/apis/apps/v1/namespaces/x/statefulsets/s/status");
        assert!(t.status && t.name.as_deref() == Some("s"));
        let t = target("/apis/apps/v1/statefulsets");
        assert!(t.namespace.is_none() && t.name.is_none());
    }

    #[test]
    fn rejects_unknown_kinds_and_subresources() {
        let r = Registry::with_builtins();
        for p in [
            "/apis/example.com/v1/namespaces/a/widgets",
            "/api/v1/namespaces/a/configmaps/cm/status",
            "/api/v1/namespaces/a/pods/p/exec",
            "/api/v1/configmaps/cm",
        ] {
            assert_eq!(route(p, &r).unwrap_err().code, 404, "{p}");
        }
    }

    #[test]
    fn decodes_selectors() {
        let q = Query::parse(Some(
            "labelSelector=app%3Dweb%2Ctier+in+%28a%2Cb%29&watch=true&limit=5",
        ))
        .unwrap();
        assert_eq!(q.label_selector.as_deref(), Some("app=web,tier in (a,b)"));
        assert!(q.watch);
        assert_eq!(q.limit, Some(5));
    }
}
