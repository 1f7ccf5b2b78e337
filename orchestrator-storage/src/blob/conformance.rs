//! Conformance suite for [`BlobStore`]: every implementation runs [`run_all`] in its tests
//! (cargo feature `testing`).
//!
//! ```
//! use orchestrator_storage::blob::{conformance::run_all, InMemoryBlobStore};
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! run_all(|| async { InMemoryBlobStore::new() }).await;
//! # });
//! ```
//!
//! The factory makes a fresh, empty store that nobody else uses. Each case panics with a
//! message naming it when the store misbehaves (this is test support code: a failed check is
//! a test failure). The cases are listed once, in [`run_all`], so an implementation cannot
//! skip one.

use std::future::Future;

use futures::future::join_all;

use super::{BlobError, BlobKey, BlobMeta, BlobStore};

/// Runs every case, each against a fresh store from `factory`.
///
/// Panics, naming the case, on the first check that fails.
pub async fn run_all<F, Fut, S>(factory: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = S>,
    S: BlobStore,
{
    put_then_get_round_trips_bytes_and_meta(&factory().await).await;
    an_empty_blob_round_trips(&factory().await).await;
    put_replaces_bytes_and_meta(&factory().await).await;
    a_missing_key_is_none(&factory().await).await;
    delete_says_whether_there_was_a_blob(&factory().await).await;
    list_matches_prefixes_on_segment_boundaries(&factory().await).await;
    invalid_keys_and_prefixes_are_refused(&factory().await).await;
    a_large_blob_round_trips(&factory().await).await;
    concurrent_puts_of_different_keys_all_land(&factory().await).await;
    readers_see_whole_blobs_while_a_key_is_overwritten(&factory().await).await;
}

fn key(text: &str) -> BlobKey {
    match BlobKey::new(text) {
        Ok(key) => key,
        Err(e) => panic!("the suite's own key {text:?} is refused: {e}"),
    }
}

async fn put(case: &str, store: &dyn BlobStore, k: &BlobKey, bytes: &[u8], meta: BlobMeta) {
    if let Err(e) = store.put(k, bytes.to_vec(), meta).await {
        panic!("{case}: put {k} failed: {e}");
    }
}

async fn get(case: &str, store: &dyn BlobStore, k: &BlobKey) -> Option<(Vec<u8>, BlobMeta)> {
    match store.get(k).await {
        Ok(found) => found,
        Err(e) => panic!("{case}: get {k} failed: {e}"),
    }
}

async fn list(case: &str, store: &dyn BlobStore, prefix: &str) -> Vec<String> {
    match store.list(prefix).await {
        Ok(keys) => keys.iter().map(|k| k.as_str().to_owned()).collect(),
        Err(e) => panic!("{case}: list {prefix:?} failed: {e}"),
    }
}

/// Asserts that `k` holds `bytes` with `meta` (sealed to them).
async fn assert_holds(
    case: &str,
    store: &dyn BlobStore,
    k: &BlobKey,
    bytes: &[u8],
    meta: &BlobMeta,
) {
    let Some((found, found_meta)) = get(case, store, k).await else {
        panic!("{case}: get {k} found nothing after put");
    };
    assert!(
        found == bytes,
        "{case}: get {k} returned other bytes than were put ({} bytes, {} expected)",
        found.len(),
        bytes.len()
    );
    assert_eq!(
        found_meta,
        meta.clone().sealed(bytes),
        "{case}: get {k} returned other metadata"
    );
}

async fn put_then_get_round_trips_bytes_and_meta(store: &dyn BlobStore) {
    let case = "put_then_get_round_trips_bytes_and_meta";
    let k = key("sessions/plan-1/node.2");
    let meta = BlobMeta::new()
        .with("cli", "claude")
        .with("plan", "plan-1")
        .with("note", "spaces, ünïcode & \"quotes\"");
    put(case, store, &k, b"a tarball", meta.clone()).await;
    assert_holds(case, store, &k, b"a tarball", &meta).await;
    let Some((_, found)) = get(case, store, &k).await else {
        panic!("{case}: the blob vanished");
    };
    assert_eq!(found.size(), 9, "{case}: size");
    assert_eq!(
        found.sha256().len(),
        64,
        "{case}: sha256 {:?}",
        found.sha256()
    );
    assert_eq!(
        found.attribute("note"),
        Some("spaces, ünïcode & \"quotes\""),
        "{case}"
    );
}

async fn an_empty_blob_round_trips(store: &dyn BlobStore) {
    let case = "an_empty_blob_round_trips";
    let k = key("empty");
    put(case, store, &k, b"", BlobMeta::new()).await;
    assert_holds(case, store, &k, b"", &BlobMeta::new()).await;
    assert_eq!(list(case, store, "").await, ["empty"], "{case}");
}

async fn put_replaces_bytes_and_meta(store: &dyn BlobStore) {
    let case = "put_replaces_bytes_and_meta";
    let k = key("a/b");
    put(
        case,
        store,
        &k,
        b"first, the longer one",
        BlobMeta::new().with("n", "1"),
    )
    .await;
    let second = BlobMeta::new().with("m", "2");
    put(case, store, &k, b"second", second.clone()).await;
    assert_holds(case, store, &k, b"second", &second).await;
    put(case, store, &k, b"second", second.clone()).await;
    assert_holds(case, store, &k, b"second", &second).await;
    assert_eq!(
        list(case, store, "").await,
        ["a/b"],
        "{case}: one key after overwrites"
    );
}

async fn a_missing_key_is_none(store: &dyn BlobStore) {
    let case = "a_missing_key_is_none";
    assert!(
        get(case, store, &key("nothing/here")).await.is_none(),
        "{case}: on an empty store"
    );
    put(case, store, &key("a/b"), b"x", BlobMeta::new()).await;
    for missing in ["a", "a/b/c", "a/bb", "b"] {
        assert!(
            get(case, store, &key(missing)).await.is_none(),
            "{case}: {missing}"
        );
    }
    assert!(
        list(case, store, "b").await.is_empty(),
        "{case}: list of a missing prefix"
    );
}

async fn delete_says_whether_there_was_a_blob(store: &dyn BlobStore) {
    let case = "delete_says_whether_there_was_a_blob";
    let (k, other) = (key("s/one"), key("s/two"));
    put(case, store, &k, b"1", BlobMeta::new()).await;
    put(case, store, &other, b"2", BlobMeta::new()).await;
    let delete = |k: BlobKey| async move {
        match store.delete(&k).await {
            Ok(existed) => existed,
            Err(e) => panic!("{case}: delete {k} failed: {e}"),
        }
    };
    assert!(
        delete(k.clone()).await,
        "{case}: delete of a stored blob says false"
    );
    assert!(
        get(case, store, &k).await.is_none(),
        "{case}: a deleted blob is still there"
    );
    assert!(
        !delete(k.clone()).await,
        "{case}: a second delete says true"
    );
    assert!(
        !delete(key("never")).await,
        "{case}: delete of a missing key says true"
    );
    assert_holds(case, store, &other, b"2", &BlobMeta::new()).await;
    assert_eq!(list(case, store, "").await, ["s/two"], "{case}");
    put(case, store, &k, b"again", BlobMeta::new()).await;
    assert_holds(case, store, &k, b"again", &BlobMeta::new()).await;
}

async fn list_matches_prefixes_on_segment_boundaries(store: &dyn BlobStore) {
    let case = "list_matches_prefixes_on_segment_boundaries";
    let keys = [
        "t",
        "s/p1/n2",
        "s/p10",
        "s/p1",
        "s/p1.old",
        "s/p1/n1",
        "s/p1/deep/x",
        "s-p1",
    ];
    for k in keys {
        put(case, store, &key(k), k.as_bytes(), BlobMeta::new()).await;
    }
    let mut all: Vec<&str> = keys.to_vec();
    all.sort_unstable();
    assert_eq!(
        list(case, store, "").await,
        all,
        "{case}: every key, sorted"
    );
    assert_eq!(
        list(case, store, "/").await,
        all,
        "{case}: \"/\" is the empty prefix"
    );
    let p1 = ["s/p1", "s/p1/deep/x", "s/p1/n1", "s/p1/n2"];
    assert_eq!(list(case, store, "s/p1").await, p1, "{case}: s/p1");
    assert_eq!(list(case, store, "s/p1/").await, p1, "{case}: s/p1/");
    assert_eq!(
        list(case, store, "s/p1/n1").await,
        ["s/p1/n1"],
        "{case}: an exact key"
    );
    assert_eq!(
        list(case, store, "s/p1/deep").await,
        ["s/p1/deep/x"],
        "{case}: a folder only"
    );
    assert!(
        list(case, store, "s/p").await.is_empty(),
        "{case}: s/p is no segment"
    );
    assert_eq!(list(case, store, "s").await.len(), 6, "{case}: s");
    assert_eq!(list(case, store, "t").await, ["t"], "{case}: t");
}

async fn invalid_keys_and_prefixes_are_refused(store: &dyn BlobStore) {
    let case = "invalid_keys_and_prefixes_are_refused";
    for bad in [
        "", "/abs", "a/../b", "..", "a//b", "a/", "a b", "a\\b", "a:b",
    ] {
        match BlobKey::new(bad) {
            Err(BlobError::InvalidKey { key, .. }) => assert_eq!(key, bad, "{case}"),
            other => panic!("{case}: key {bad:?} gave {other:?}"),
        }
    }
    for bad in ["../a", "a//", "/a", "a b"] {
        match store.list(bad).await {
            Err(e @ BlobError::InvalidKey { .. }) => {
                assert!(e.to_string().contains(&format!("{bad:?}")), "{case}: {e}");
            }
            other => panic!("{case}: list {bad:?} gave {other:?}"),
        }
    }
}

async fn a_large_blob_round_trips(store: &dyn BlobStore) {
    let case = "a_large_blob_round_trips";
    // 5 MiB that no compression or deduplication can shortcut.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let bytes: Vec<u8> = (0..5 * 1024 * 1024)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect();
    let k = key("big/session.tar.gz");
    put(
        case,
        store,
        &k,
        &bytes,
        BlobMeta::new().with("kind", "tarball"),
    )
    .await;
    assert_holds(
        case,
        store,
        &k,
        &bytes,
        &BlobMeta::new().with("kind", "tarball"),
    )
    .await;
}

async fn concurrent_puts_of_different_keys_all_land(store: &dyn BlobStore) {
    let case = "concurrent_puts_of_different_keys_all_land";
    let keys: Vec<BlobKey> = (0..24).map(|i| key(&format!("c/{}/k{i}", i % 3))).collect();
    let puts = keys.iter().map(|k| async move {
        let meta = BlobMeta::new().with("key", k.as_str());
        put(case, store, k, k.as_str().as_bytes(), meta).await;
    });
    join_all(puts).await;
    for k in &keys {
        let meta = BlobMeta::new().with("key", k.as_str());
        assert_holds(case, store, k, k.as_str().as_bytes(), &meta).await;
    }
    assert_eq!(
        list(case, store, "c").await.len(),
        keys.len(),
        "{case}: listed"
    );
}

async fn readers_see_whole_blobs_while_a_key_is_overwritten(store: &dyn BlobStore) {
    let case = "readers_see_whole_blobs_while_a_key_is_overwritten";
    let k = key("hot");
    let versions: Vec<Vec<u8>> = (0..6u8)
        .map(|v| vec![v; 64 * 1024 + usize::from(v)])
        .collect();
    put(
        case,
        store,
        &k,
        &versions[0],
        BlobMeta::new().with("v", "0"),
    )
    .await;
    let writes = async {
        for (v, bytes) in versions.iter().enumerate().skip(1) {
            put(
                case,
                store,
                &k,
                bytes,
                BlobMeta::new().with("v", v.to_string()),
            )
            .await;
        }
    };
    let reads = join_all((0..12).map(|_| async {
        let Some((bytes, meta)) = get(case, store, &k).await else {
            panic!("{case}: the blob vanished while being overwritten");
        };
        let v: usize = meta
            .attribute("v")
            .and_then(|v| v.parse().ok())
            .unwrap_or(usize::MAX);
        assert!(
            versions.get(v) == Some(&bytes),
            "{case}: bytes of another version than meta {v}"
        );
    }));
    futures::join!(writes, reads);
    let last = versions.len() - 1;
    let meta = BlobMeta::new().with("v", last.to_string());
    assert_holds(case, store, &k, &versions[last], &meta).await;
}
