//! The blob store (parked agent sessions): the conformance suite against every backend, the
//! URL forms, damage detection, and the tarballs of `pack_dir` / `unpack_into`.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use orchestrator_storage::blob::conformance::run_all;
use orchestrator_storage::blob::{
    pack_dir, unpack_into, BlobError, BlobKey, BlobMeta, BlobStore, InMemoryBlobStore,
    ObjectBlobStore,
};

/// A fresh folder below `root` for every call.
fn fresh(root: &Path, n: &AtomicUsize) -> PathBuf {
    root.join(format!("store-{}", n.fetch_add(1, Ordering::Relaxed)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blob_conformance_in_memory() {
    run_all(|| async { InMemoryBlobStore::new() }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blob_conformance_local_folder() {
    let root = tempfile::tempdir().expect("temp dir");
    let n = AtomicUsize::new(0);
    run_all(|| async { ObjectBlobStore::local(fresh(root.path(), &n)).expect("local store") })
        .await;
}

#[tokio::test]
async fn blob_conformance_local_folder_current_thread() {
    let root = tempfile::tempdir().expect("temp dir");
    let n = AtomicUsize::new(0);
    run_all(|| async { ObjectBlobStore::local(fresh(root.path(), &n)).expect("local store") })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blob_conformance_file_url() {
    let root = tempfile::tempdir().expect("temp dir");
    let n = AtomicUsize::new(0);
    run_all(|| async {
        let dir = fresh(root.path(), &n).join("nested/blobs");
        let url = url::Url::from_file_path(&dir).expect("file URL");
        ObjectBlobStore::from_url(url.as_str()).expect("file:// store")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blob_conformance_memory_url() {
    run_all(|| async { ObjectBlobStore::from_url("memory://").expect("memory:// store") }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blob_conformance_memory_url_with_a_root() {
    run_all(|| async { ObjectBlobStore::from_url("memory:///parked/here").expect("store") }).await;
}

#[test]
fn blob_urls_say_what_is_wrong() {
    let message = |url: &str| match ObjectBlobStore::from_url(url) {
        Ok(store) => panic!("{url} opened {store:?}"),
        Err(e) => e.to_string(),
    };
    for (url, feature) in [
        ("s3://bucket/sessions", "s3"),
        ("az://container/sessions", "azure"),
        ("gs://bucket/sessions", "gcp"),
    ] {
        let enabled = match feature {
            "s3" => cfg!(feature = "s3"),
            "azure" => cfg!(feature = "azure"),
            _ => cfg!(feature = "gcp"),
        };
        if !enabled {
            let text = message(url);
            assert!(
                text.contains(url) && text.contains(&format!("`{feature}`")),
                "{text}"
            );
        }
    }
    for url in [
        "ftp://host/x",
        "https://example.com/x",
        "not a url",
        "file://otherhost/x",
    ] {
        let text = message(url);
        assert!(text.contains(&format!("{url:?}")), "{text}");
    }
}

#[tokio::test]
async fn blob_local_store_creates_its_folder() {
    let root = tempfile::tempdir().expect("temp dir");
    let dir = root.path().join("a/b/blobs");
    let store = ObjectBlobStore::local(&dir).expect("local store");
    assert!(dir.is_dir());
    let key = BlobKey::new("k").expect("key");
    store
        .put(&key, b"x".to_vec(), BlobMeta::new())
        .await
        .expect("put");
    // A second store on the same folder (another process, a restarted host) sees the blob.
    let again = ObjectBlobStore::local(&dir).expect("reopen");
    let (bytes, _) = again.get(&key).await.expect("get").expect("stored");
    assert_eq!(bytes, b"x");
}

/// Every file below `dir`.
fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            found.extend(files_below(&path));
        } else {
            found.push(path);
        }
    }
    found
}

#[tokio::test]
async fn blob_damaged_or_missing_data_is_an_error_not_wrong_bytes() {
    let root = tempfile::tempdir().expect("temp dir");
    let store = ObjectBlobStore::local(root.path()).expect("local store");
    let key = BlobKey::new("sessions/s1").expect("key");
    store
        .put(&key, b"original bytes".to_vec(), BlobMeta::new())
        .await
        .expect("put");
    let data = files_below(&root.path().join("data"));
    assert_eq!(data.len(), 1, "one data object: {data:?}");
    fs::write(&data[0], b"original byteZ").expect("damage");
    match store.get(&key).await {
        Err(e @ BlobError::Damaged { .. }) => {
            assert!(e.to_string().contains("sessions/s1"), "{e}");
        }
        other => panic!("damaged data gave {other:?}"),
    }
    fs::remove_file(&data[0]).expect("remove");
    assert!(matches!(
        store.get(&key).await,
        Err(BlobError::Damaged { .. })
    ));
    // The blob can still be deleted and written again.
    assert!(store.delete(&key).await.expect("delete"));
    store
        .put(&key, b"new".to_vec(), BlobMeta::new())
        .await
        .expect("put again");
    assert_eq!(
        store.get(&key).await.expect("get").expect("stored").0,
        b"new"
    );
}

#[tokio::test]
async fn blob_overwrites_leave_one_data_object() {
    let root = tempfile::tempdir().expect("temp dir");
    let store = ObjectBlobStore::local(root.path()).expect("local store");
    let key = BlobKey::new("k").expect("key");
    for round in 0..3 {
        let bytes = format!("round {round}").into_bytes();
        store.put(&key, bytes, BlobMeta::new()).await.expect("put");
    }
    assert_eq!(files_below(&root.path().join("data")).len(), 1);
    assert!(store.delete(&key).await.expect("delete"));
    assert!(files_below(&root.path().join("data")).is_empty());
}

// --- archives -------------------------------------------------------------------------

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::symlink_metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

/// A CLI state folder: nested files, an executable, an empty folder, and symlinks.
fn sample_state(dir: &Path) {
    fs::create_dir_all(dir.join("sessions/2024/deep")).expect("mkdir");
    fs::create_dir_all(dir.join("empty")).expect("mkdir");
    fs::write(dir.join("config.json"), r#"{"model":"m"}"#).expect("write");
    fs::write(dir.join("sessions/2024/deep/s1.jsonl"), "line 1\nline 2\n").expect("write");
    fs::write(dir.join("sessions/big.bin"), vec![7u8; 300_000]).expect("write");
    fs::write(dir.join("hook.sh"), "#!/bin/sh\necho hi\n").expect("write");
    #[cfg(unix)]
    {
        use std::os::unix::fs::{symlink, PermissionsExt};
        fs::set_permissions(dir.join("hook.sh"), fs::Permissions::from_mode(0o755)).expect("chmod");
        symlink("sessions/2024/deep/s1.jsonl", dir.join("latest")).expect("symlink");
        symlink("../../config.json", dir.join("sessions/2024/config")).expect("symlink");
    }
}

#[test]
fn blob_archive_round_trip_keeps_paths_modes_and_symlinks() {
    let work = tempfile::tempdir().expect("temp dir");
    let state = work.path().join("state");
    sample_state(&state);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&state, fs::Permissions::from_mode(0o750)).expect("chmod");
        let private = state.join("sessions/2024");
        fs::set_permissions(private, fs::Permissions::from_mode(0o700)).expect("chmod");
    }
    let tarball = pack_dir(&state).expect("pack");
    assert_eq!(
        pack_dir(&state).expect("pack again"),
        tarball,
        "packing is deterministic"
    );

    let restored = work.path().join("elsewhere/state");
    unpack_into(&tarball, &restored).expect("unpack");
    let read = |rel: &str| fs::read(restored.join(rel)).expect(rel);
    assert_eq!(read("config.json"), br#"{"model":"m"}"#);
    assert_eq!(read("sessions/2024/deep/s1.jsonl"), b"line 1\nline 2\n");
    assert_eq!(read("sessions/big.bin"), vec![7u8; 300_000]);
    assert!(restored.join("empty").is_dir());
    #[cfg(unix)]
    {
        assert_eq!(mode(&restored), 0o750, "the folder's own mode");
        assert_eq!(mode(&restored.join("sessions/2024")), 0o700);
        assert_eq!(mode(&restored.join("hook.sh")), 0o755);
        assert_eq!(
            mode(&restored.join("config.json")),
            mode(&state.join("config.json"))
        );
        let link = restored.join("latest");
        assert!(fs::symlink_metadata(&link)
            .expect("link")
            .file_type()
            .is_symlink());
        assert_eq!(
            fs::read_link(&link).expect("target"),
            Path::new("sessions/2024/deep/s1.jsonl")
        );
        assert_eq!(read("latest"), b"line 1\nline 2\n");
        assert_eq!(read("sessions/2024/config"), br#"{"model":"m"}"#);
    }
    // No scratch folder is left beside the target.
    let beside: Vec<_> = fs::read_dir(work.path().join("elsewhere"))
        .expect("ls")
        .collect();
    assert_eq!(beside.len(), 1);
}

#[test]
fn blob_archive_into_an_existing_empty_folder_but_not_a_full_one() {
    let work = tempfile::tempdir().expect("temp dir");
    let state = work.path().join("state");
    sample_state(&state);
    let tarball = pack_dir(&state).expect("pack");
    let empty = work.path().join("empty-target");
    fs::create_dir(&empty).expect("mkdir");
    unpack_into(&tarball, &empty).expect("unpack into an empty folder");
    assert!(empty.join("config.json").is_file());
    match unpack_into(&tarball, &state) {
        Err(e @ BlobError::Archive { .. }) => assert!(e.to_string().contains("not empty"), "{e}"),
        other => panic!("unpacking onto a full folder gave {other:?}"),
    }
    assert_eq!(
        fs::read(state.join("config.json")).expect("kept"),
        br#"{"model":"m"}"#
    );
}

#[test]
fn blob_truncated_or_damaged_archives_leave_the_target_untouched() {
    let work = tempfile::tempdir().expect("temp dir");
    let state = work.path().join("state");
    sample_state(&state);
    let tarball = pack_dir(&state).expect("pack");
    let missing = work.path().join("targets/missing");
    let empty = work.path().join("targets/empty");
    fs::create_dir_all(&empty).expect("mkdir");
    let mut flipped = tarball.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0xff;
    let cuts = [
        1,
        10,
        tarball.len() / 3,
        tarball.len() / 2,
        tarball.len() - 4,
        tarball.len() - 1,
    ];
    let mut damaged: Vec<Vec<u8>> = cuts.iter().map(|&n| tarball[..n].to_vec()).collect();
    damaged.push(flipped);
    damaged.push(b"not a tarball at all".to_vec());
    damaged.push(Vec::new());
    for bytes in &damaged {
        for target in [&missing, &empty] {
            match unpack_into(bytes, target) {
                Err(BlobError::Archive { .. }) => {}
                other => panic!("{} damaged bytes gave {other:?}", bytes.len()),
            }
        }
        assert!(!missing.exists(), "a missing target appeared");
        assert_eq!(
            fs::read_dir(&empty).expect("ls").count(),
            0,
            "the empty target filled"
        );
        let beside = fs::read_dir(work.path().join("targets"))
            .expect("ls")
            .count();
        assert_eq!(beside, 1, "a scratch folder was left");
    }
}

/// A raw archive entry: name, kind, link target, data.
type RawEntry<'a> = (&'a str, tar::EntryType, &'a str, &'a [u8]);

/// A gzipped tarball of raw entries, names written as given (no checks, as a hostile archive
/// would).
fn raw_archive(entries: &[RawEntry<'_>]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut builder = tar::Builder::new(gz);
    for (name, kind, link, data) in entries {
        let mut header = tar::Header::new_gnu();
        let gnu = header.as_gnu_mut().expect("gnu header");
        gnu.name[..name.len()].copy_from_slice(name.as_bytes());
        gnu.linkname[..link.len()].copy_from_slice(link.as_bytes());
        header.set_entry_type(*kind);
        header.set_mode(if *kind == tar::EntryType::Directory {
            0o755
        } else {
            0o644
        });
        header.set_size(data.len() as u64);
        header.set_cksum();
        builder.append(&header, *data).expect("append");
    }
    builder.into_inner().expect("tar").finish().expect("gzip")
}

#[test]
fn blob_archives_reaching_outside_the_folder_are_refused() {
    use tar::EntryType::{Directory, Link, Regular, Symlink};
    let hostile: Vec<(&str, Vec<RawEntry<'_>>)> = vec![
        (
            "parent path",
            vec![
                ("ok.txt", Regular, "", b"ok"),
                ("../evil", Regular, "", b"x"),
            ],
        ),
        (
            "nested parent path",
            vec![("a/../../evil", Regular, "", b"x")],
        ),
        (
            "absolute path",
            vec![("/tmp/evil-absolute", Regular, "", b"x")],
        ),
        ("absolute link", vec![("l", Symlink, "/etc", b"")]),
        ("climbing link", vec![("d/l", Symlink, "../../evil", b"")]),
        (
            "link through a link",
            vec![("a", Symlink, ".", b""), ("b", Symlink, "a/..", b"")],
        ),
        (
            "below a link",
            vec![
                ("l", Symlink, "d", b""),
                ("d", Directory, "", b""),
                ("l/x", Regular, "", b"x"),
            ],
        ),
        ("hard link", vec![("h", Link, "/etc/passwd", b"")]),
        ("device", vec![("dev", tar::EntryType::Char, "", b"")]),
    ];
    let work = tempfile::tempdir().expect("temp dir");
    let target = work.path().join("box/target");
    for (name, entries) in hostile {
        match unpack_into(&raw_archive(&entries), &target) {
            Err(e @ BlobError::UnsafeEntry { .. }) => {
                assert!(e.to_string().contains("refused entry"), "{name}: {e}");
            }
            other => panic!("{name}: gave {other:?}"),
        }
        assert!(!target.exists(), "{name}: the target appeared");
        assert!(
            !work.path().join("box/evil").exists(),
            "{name}: wrote outside"
        );
        assert_eq!(
            fs::read_dir(work.path().join("box")).expect("ls").count(),
            0,
            "{name}"
        );
    }
    assert!(!Path::new("/tmp/evil-absolute").exists());
    // The same shapes, kept inside, are fine.
    let fine = raw_archive(&[
        ("./", Directory, "", b""),
        ("d/f", Regular, "", b"f"),
        ("d/l", Symlink, "../d/f", b""),
        ("top", Symlink, "d", b""),
    ]);
    unpack_into(&fine, &target).expect("inside links");
    assert_eq!(
        fs::read(target.join("d/l")).expect("through the link"),
        b"f"
    );
}

#[cfg(unix)]
#[test]
fn blob_pack_refuses_symlinks_out_of_the_folder() {
    let work = tempfile::tempdir().expect("temp dir");
    fs::write(work.path().join("secret"), "outside").expect("write");
    for (link, target) in [
        ("out", "../secret"),
        ("abs", "/etc/passwd"),
        ("sneaky", "x/../.."),
    ] {
        let state = work.path().join(format!("state-{link}"));
        fs::create_dir(&state).expect("mkdir");
        std::os::unix::fs::symlink(target, state.join(link)).expect("symlink");
        match pack_dir(&state) {
            Err(e @ BlobError::UnsafeEntry { .. }) => assert!(e.to_string().contains(link), "{e}"),
            other => panic!("{link} -> {target}: gave {other:?}"),
        }
    }
    // A link to a folder is kept as a link, never followed.
    let state = work.path().join("state-dir-link");
    fs::create_dir_all(state.join("real")).expect("mkdir");
    fs::write(state.join("real/f"), "f").expect("write");
    std::os::unix::fs::symlink("real", state.join("alias")).expect("symlink");
    let restored = work.path().join("restored");
    unpack_into(&pack_dir(&state).expect("pack"), &restored).expect("unpack");
    assert!(fs::symlink_metadata(restored.join("alias"))
        .expect("alias")
        .file_type()
        .is_symlink());
    assert_eq!(fs::read(restored.join("alias/f")).expect("through"), b"f");
}

#[test]
fn blob_pack_of_a_file_or_a_missing_folder_is_an_error() {
    let work = tempfile::tempdir().expect("temp dir");
    let file = work.path().join("file");
    fs::write(&file, "x").expect("write");
    assert!(matches!(pack_dir(&file), Err(BlobError::Archive { .. })));
    let missing = work.path().join("missing");
    match pack_dir(&missing) {
        Err(e @ BlobError::Io { .. }) => assert!(e.to_string().contains("missing"), "{e}"),
        other => panic!("gave {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blob_dehydrate_then_hydrate_on_another_store_handle() {
    let work = tempfile::tempdir().expect("temp dir");
    let state = work.path().join("cli-state");
    sample_state(&state);
    let url = url::Url::from_file_path(work.path().join("blobs")).expect("url");
    let parking: Box<dyn BlobStore> =
        Box::new(ObjectBlobStore::from_url(url.as_str()).expect("store"));
    let key = BlobKey::new("plan-1/node-3/session").expect("key");
    let tarball = pack_dir(&state).expect("pack");
    let meta = BlobMeta::new().with("cli", "claude").with("session", "abc");
    parking.put(&key, tarball, meta).await.expect("park");
    fs::remove_dir_all(&state).expect("remove the state");

    let waking = ObjectBlobStore::from_url(url.as_str()).expect("store on the waking side");
    assert_eq!(
        waking.list("plan-1").await.expect("list"),
        vec![key.clone()]
    );
    let (bytes, meta) = waking.get(&key).await.expect("get").expect("parked");
    assert_eq!(meta.attribute("session"), Some("abc"));
    unpack_into(&bytes, &state).expect("hydrate");
    assert_eq!(
        fs::read(state.join("config.json")).expect("back"),
        br#"{"model":"m"}"#
    );
    assert!(waking.delete(&key).await.expect("delete"));
}
