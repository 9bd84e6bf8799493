//! Secondary indexes over the shared stores: the DNSRecords of a zone
//! (from any namespace: a record names its zone's namespace with
//! `spec.zoneNamespace`), the
//! BindZones of a cluster, the BindZones naming one zone. A zone reconcile
//! asks these instead of scanning a whole store, which at 1,000 zones and
//! 10,000 records made a first sync cost O(zones x records) CPU.
//!
//! Ordering: a store's feed ([`crate::controller::stores`]) updates its
//! indexes after the store and before any subscriber hears of the change,
//! so a reconcile woken by an object finds it in the index.
//!
//! Freshness: an index holds names only; a lookup resolves every name
//! through the store and keeps an object only if its key still matches. So
//! a lookup never returns a deleted object, a stale version, or one whose
//! key moved (whatever the index lags behind).
//!
//! Reads the stores only; touches nothing.

use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::sync::{Arc, RwLock};

use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::{BindZone, DNSRecord};

/// Told of every change of one store, in order, after the store has it and
/// before any subscriber does (see [`crate::controller::stores`]). Each call
/// must be idempotent: a change may be told twice.
pub trait Observer<K>: Send + Sync {
    /// `obj` was created or changed (as stored).
    fn applied(&self, obj: &Arc<K>);
    /// `obj` was deleted (as last seen).
    fn deleted(&self, obj: &K);
    /// A (re-)list ended: `all` is everything the store holds now.
    fn relisted(&self, all: &[Arc<K>]);
}

/// Namespace and name of an object.
type Id = (String, String);

fn id_of<K: Resource>(obj: &K) -> Id {
    let m = obj.meta();
    (
        m.namespace.clone().unwrap_or_default(),
        m.name.clone().unwrap_or_default(),
    )
}

struct Inner<Q> {
    /// Each indexed object's key.
    key_of: HashMap<Id, Q>,
    /// The objects under each key, by namespace and name.
    members: HashMap<Q, BTreeSet<Id>>,
}

impl<Q: Hash + Eq + Clone> Inner<Q> {
    fn remove(&mut self, id: &Id) {
        if let Some(old) = self.key_of.remove(id)
            && let Some(set) = self.members.get_mut(&old)
        {
            set.remove(id);
            if set.is_empty() {
                self.members.remove(&old);
            }
        }
    }

    fn insert(&mut self, id: Id, key: Option<Q>) {
        if key.is_some() && self.key_of.get(&id) == key.as_ref() {
            return;
        }
        self.remove(&id);
        if let Some(key) = key {
            self.members
                .entry(key.clone())
                .or_default()
                .insert(id.clone());
            self.key_of.insert(id, key);
        }
    }
}

/// The objects of one store grouped by a key computed from each object.
pub struct ByKey<K: Resource<DynamicType = ()> + 'static, Q> {
    store: Store<K>,
    key: fn(&K) -> Option<Q>,
    inner: RwLock<Inner<Q>>,
}

impl<K, Q> ByKey<K, Q>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
    Q: Hash + Eq + Clone,
{
    /// An empty index of `store` by `key` (`None`: not indexed). Fill it by
    /// observing the store's feed.
    pub fn new(store: Store<K>, key: fn(&K) -> Option<Q>) -> Self {
        ByKey {
            store,
            key,
            inner: RwLock::new(Inner {
                key_of: HashMap::new(),
                members: HashMap::new(),
            }),
        }
    }

    /// The live objects whose key is `key` now, by namespace and name.
    pub fn get(&self, key: &Q) -> Vec<Arc<K>> {
        let ids: Vec<Id> = {
            let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
            match inner.members.get(key) {
                Some(set) => set.iter().cloned().collect(),
                None => return Vec::new(),
            }
        };
        ids.into_iter()
            .filter_map(|(ns, name)| {
                // The id's own strings, moved in: a zone's lookup resolves
                // every one of its records, so no copies per record.
                let mut at = ObjectRef::<K>::new("");
                at.name = name;
                at.namespace = Some(ns);
                self.store.get(&at)
            })
            .filter(|obj| (self.key)(obj).as_ref() == Some(key))
            .collect()
    }
}

impl<K, Q> Observer<K> for ByKey<K, Q>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    Q: Hash + Eq + Clone + Send + Sync,
{
    fn applied(&self, obj: &Arc<K>) {
        let key = (self.key)(obj);
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        inner.insert(id_of(obj.as_ref()), key);
    }

    fn deleted(&self, obj: &K) {
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        inner.remove(&id_of(obj));
    }

    fn relisted(&self, all: &[Arc<K>]) {
        let mut fresh = Inner {
            key_of: HashMap::new(),
            members: HashMap::new(),
        };
        for obj in all {
            fresh.insert(id_of(obj.as_ref()), (self.key)(obj));
        }
        *self.inner.write().unwrap_or_else(|e| e.into_inner()) = fresh;
    }
}

/// A namespace and the name of the object an object refers to in it.
pub type RefKey = (String, String);

/// Namespace, cluster, view and normalised zone name: BindZones with the
/// same key name one zone.
pub type ZoneGroup = (String, String, Option<String>, String);

/// The normalised zone name of a BindZone (no trailing dot, lowercase).
pub fn normalised_zone_name(z: &BindZone) -> String {
    z.spec.zone_name.trim_end_matches('.').to_ascii_lowercase()
}

/// The group of BindZones naming the same zone as `z`.
pub fn zone_group(z: &BindZone) -> ZoneGroup {
    (
        z.meta().namespace.clone().unwrap_or_default(),
        z.spec.cluster_ref.clone(),
        z.spec.view.clone(),
        normalised_zone_name(z),
    )
}

fn record_zone(r: &DNSRecord) -> Option<RefKey> {
    Some((r.zone_namespace()?, r.spec.zone_ref.clone()))
}

fn zone_cluster(z: &BindZone) -> Option<RefKey> {
    Some((z.meta().namespace.clone()?, z.spec.cluster_ref.clone()))
}

/// The indexes of [`crate::controller::stores::Stores`].
#[derive(Clone)]
pub struct Indexes {
    /// DNSRecords by the zone they name: (spec.zoneNamespace or their own
    /// namespace, spec.zoneRef).
    pub records_by_zone: Arc<ByKey<DNSRecord, RefKey>>,
    /// BindZones by (namespace, spec.clusterRef).
    pub zones_by_cluster: Arc<ByKey<BindZone, RefKey>>,
    /// BindZones by the zone they name ([`zone_group`]).
    pub zones_by_name: Arc<ByKey<BindZone, ZoneGroup>>,
}

impl Indexes {
    /// Empty indexes of these stores; the stores' feeds fill them.
    pub fn new(zones: &Store<BindZone>, records: &Store<DNSRecord>) -> Self {
        Indexes {
            records_by_zone: Arc::new(ByKey::new(records.clone(), record_zone)),
            zones_by_cluster: Arc::new(ByKey::new(zones.clone(), zone_cluster)),
            zones_by_name: Arc::new(ByKey::new(zones.clone(), |z| Some(zone_group(z)))),
        }
    }

    /// The DNSRecords naming the BindZone `zone` in `ns` (from any
    /// namespace), by namespace and name.
    pub fn records_of_zone(&self, ns: &str, zone: &str) -> Vec<Arc<DNSRecord>> {
        self.records_by_zone
            .get(&(ns.to_string(), zone.to_string()))
    }

    /// The BindZones whose clusterRef names `cluster` in `ns`, by name.
    pub fn zones_of_cluster(&self, ns: &str, cluster: &str) -> Vec<Arc<BindZone>> {
        self.zones_by_cluster
            .get(&(ns.to_string(), cluster.to_string()))
    }

    /// The BindZones naming the same zone as `zone` (itself included, when
    /// stored), by name.
    pub fn zones_naming(&self, zone: &BindZone) -> Vec<Arc<BindZone>> {
        self.zones_by_name.get(&zone_group(zone))
    }

    /// The observers of the zone store.
    pub fn zone_observers(&self) -> Vec<Arc<dyn Observer<BindZone>>> {
        vec![self.zones_by_cluster.clone(), self.zones_by_name.clone()]
    }

    /// The observers of the record store.
    pub fn record_observers(&self) -> Vec<Arc<dyn Observer<DNSRecord>>> {
        vec![self.records_by_zone.clone()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::watcher;

    use crate::api::{BindZoneSpec, DNSRecordSpec};

    fn record(name: &str, zone: &str) -> DNSRecord {
        let spec: DNSRecordSpec = serde_json::from_value(serde_json::json!({
            "zoneRef": zone, "name": name, "type": "A", "values": ["192.0.2.1"]
        }))
        .unwrap();
        let mut r = DNSRecord::new(name, spec);
        r.metadata.namespace = Some("ns".into());
        r
    }

    fn bindzone(name: &str, zone_name: &str, cluster: &str) -> BindZone {
        let spec: BindZoneSpec = serde_json::from_value(serde_json::json!({
            "clusterRef": cluster, "zoneName": zone_name
        }))
        .unwrap();
        let mut z = BindZone::new(name, spec);
        z.metadata.namespace = Some("ns".into());
        z
    }

    fn names<K: Resource>(objs: &[Arc<K>]) -> Vec<String> {
        objs.iter()
            .map(|o| o.meta().name.clone().unwrap())
            .collect()
    }

    /// Applies an event to the store, then tells the index, as a feed does.
    fn apply<K, Q>(
        writer: &mut kube::runtime::reflector::store::Writer<K>,
        store: &Store<K>,
        index: &ByKey<K, Q>,
        event: watcher::Event<K>,
    ) where
        K: Resource<DynamicType = ()> + Clone + Send + Sync + std::fmt::Debug + 'static,
        Q: Hash + Eq + Clone + Send + Sync,
    {
        writer.apply_watcher_event(&event);
        match event {
            watcher::Event::Apply(o) => {
                index.applied(&store.get(&ObjectRef::from_obj(&o)).unwrap())
            }
            watcher::Event::Delete(o) => index.deleted(&o),
            watcher::Event::InitDone => index.relisted(&store.state()),
            _ => {}
        }
    }

    #[test]
    fn a_record_created_moved_and_deleted_is_seen_only_while_it_names_the_zone() {
        let (store, mut writer) = kube::runtime::reflector::store::<DNSRecord>();
        let index = ByKey::new(store.clone(), record_zone);
        let key = |z: &str| ("ns".to_string(), z.to_string());
        let www = record("www", "example-com");
        apply(
            &mut writer,
            &store,
            &index,
            watcher::Event::Apply(www.clone()),
        );
        apply(
            &mut writer,
            &store,
            &index,
            watcher::Event::Apply(record("api", "example-com")),
        );
        apply(
            &mut writer,
            &store,
            &index,
            watcher::Event::Apply(record("mx", "other")),
        );
        assert_eq!(names(&index.get(&key("example-com"))), ["api", "www"]);
        assert_eq!(names(&index.get(&key("other"))), ["mx"]);

        // Changed: the lookup returns the stored version.
        let mut changed = www.clone();
        changed.spec.ttl = Some(42);
        apply(&mut writer, &store, &index, watcher::Event::Apply(changed));
        let got = index.get(&key("example-com"));
        assert_eq!(
            got.iter().find(|r| r.spec.name == "www").unwrap().spec.ttl,
            Some(42)
        );

        // Moved to another zone: gone from the first, seen in the second.
        let moved = record("www", "other");
        apply(
            &mut writer,
            &store,
            &index,
            watcher::Event::Apply(moved.clone()),
        );
        assert_eq!(names(&index.get(&key("example-com"))), ["api"]);
        assert_eq!(names(&index.get(&key("other"))), ["mx", "www"]);

        // Deleted.
        apply(&mut writer, &store, &index, watcher::Event::Delete(moved));
        assert_eq!(names(&index.get(&key("other"))), ["mx"]);
        assert!(index.get(&key("nothing")).is_empty());
    }

    #[test]
    fn a_lookup_never_returns_what_the_store_no_longer_holds() {
        // The index lags (the store changed, the index was not told yet):
        // the lookup still answers from the store.
        let (store, mut writer) = kube::runtime::reflector::store::<DNSRecord>();
        let index = ByKey::new(store.clone(), record_zone);
        let key = ("ns".to_string(), "example-com".to_string());
        let www = record("www", "example-com");
        apply(
            &mut writer,
            &store,
            &index,
            watcher::Event::Apply(www.clone()),
        );
        writer.apply_watcher_event(&watcher::Event::Delete(www));
        assert!(index.get(&key).is_empty());
        writer.apply_watcher_event(&watcher::Event::Apply(record("www", "other")));
        assert!(index.get(&key).is_empty());
    }

    #[test]
    fn a_relist_replaces_the_index() {
        let (store, mut writer) = kube::runtime::reflector::store::<DNSRecord>();
        let index = ByKey::new(store.clone(), record_zone);
        let key = ("ns".to_string(), "example-com".to_string());
        apply(
            &mut writer,
            &store,
            &index,
            watcher::Event::Apply(record("old", "example-com")),
        );
        apply(&mut writer, &store, &index, watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitApply(record("new", "example-com")));
        apply(&mut writer, &store, &index, watcher::Event::InitDone);
        assert_eq!(names(&index.get(&key)), ["new"]);
        let inner = index.inner.read().unwrap();
        assert_eq!(inner.key_of.len(), 1, "the vanished record is forgotten");
    }

    #[test]
    fn zones_are_grouped_by_cluster_and_by_the_zone_they_name() {
        let (zones, mut writer) = kube::runtime::reflector::store::<BindZone>();
        let (records, _) = kube::runtime::reflector::store::<DNSRecord>();
        let ix = Indexes::new(&zones, &records);
        let mut tell = |z: BindZone| {
            writer.apply_watcher_event(&watcher::Event::Apply(z.clone()));
            let stored = zones.get(&ObjectRef::from_obj(&z)).unwrap();
            for o in ix.zone_observers() {
                o.applied(&stored);
            }
        };
        tell(bindzone("a", "Example.com.", "c1"));
        tell(bindzone("b", "example.com", "c1"));
        tell(bindzone("c", "example.org", "c1"));
        tell(bindzone("d", "example.com", "c2"));
        assert_eq!(names(&ix.zones_of_cluster("ns", "c1")), ["a", "b", "c"]);
        assert_eq!(names(&ix.zones_of_cluster("ns", "c2")), ["d"]);
        assert!(ix.zones_of_cluster("other", "c1").is_empty());
        assert_eq!(
            names(&ix.zones_naming(&bindzone("x", "EXAMPLE.COM", "c1"))),
            ["a", "b"]
        );
        let mut in_view = bindzone("x", "example.com", "c1");
        in_view.spec.view = Some("inside".into());
        assert!(ix.zones_naming(&in_view).is_empty());
    }

    #[test]
    fn a_record_is_found_under_the_zone_it_names_in_another_namespace() {
        let (store, mut writer) = kube::runtime::reflector::store::<DNSRecord>();
        let index = ByKey::new(store.clone(), record_zone);
        let mut team = record("api", "example-com");
        team.metadata.namespace = Some("team-a".into());
        team.spec.zone_namespace = Some("platform".into());
        let mut own = record("www", "example-com");
        own.metadata.namespace = Some("platform".into());
        for r in [team, own] {
            apply(&mut writer, &store, &index, watcher::Event::Apply(r));
        }
        let key = |ns: &str| (ns.to_string(), "example-com".to_string());
        let found = index.get(&key("platform"));
        let ids: Vec<(String, String)> = found
            .iter()
            .map(|r| {
                (
                    r.metadata.namespace.clone().unwrap(),
                    r.metadata.name.clone().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            ids,
            [
                ("platform".to_string(), "www".to_string()),
                ("team-a".to_string(), "api".to_string())
            ]
        );
        assert!(index.get(&key("team-a")).is_empty());
    }
}
