//! Symlinks: followed only to a regular file inside the folder, every other one said once
//! with its reason; a Kubernetes ConfigMap mount read through its links.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

#[test]
fn a_symlink_is_followed_only_to_a_regular_file_inside_the_folder() {
    let folder = Folder::new();
    std::fs::create_dir_all(folder.path("pages")).unwrap();
    folder.write("pages/real.txt", "The real page.\n");
    std::os::unix::fs::symlink(folder.path("pages/real.txt"), folder.path("alias.md")).unwrap();
    std::os::unix::fs::symlink("pages/../pages/real.txt", folder.path("relative.md")).unwrap();
    std::os::unix::fs::symlink(folder.path("nowhere.md"), folder.path("dangling.md")).unwrap();
    std::os::unix::fs::symlink(folder.path("pages"), folder.path("linked-folder")).unwrap();
    let (mut watcher, mut output) = folder.watcher(0, 1000);
    let outcome = within_deadline(watcher.scan(Some(Instant::now()))).unwrap();
    let mut events = sent(&mut output);
    events.sort();
    let page = Some("The real page.\n".to_owned());
    assert_eq!(
        events,
        [
            ("alias".into(), page.clone()),
            ("pages/real".into(), page.clone()),
            ("relative".into(), page)
        ],
        "a dangling symlink is no document; a symlinked folder is not entered"
    );
    let mut reported = outcome.reported;
    reported.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        reported,
        [
            (
                folder.path("dangling.md"),
                Unusable::Dangling(folder.path("nowhere.md"))
            ),
            (
                folder.path("linked-folder"),
                Unusable::SymlinkedFolder {
                    target: std::fs::canonicalize(folder.path("pages")).unwrap(),
                    inside: true
                }
            ),
        ],
        "each symlink not followed is said, once"
    );
    let again = within_deadline(watcher.scan(Some(Instant::now()))).unwrap();
    assert!(again.reported.is_empty(), "{:?}", again.reported);
}

/// A Kubernetes ConfigMap volume: each file is a symlink through the hidden `..data` link
/// into a hidden timestamped folder; an update writes a new folder and swaps `..data`.
#[test]
fn a_configmap_mount_is_read_through_its_links_and_follows_an_update() {
    let folder = Folder::new();
    let write_version = |name: &str, text: &str| {
        std::fs::create_dir_all(folder.path(name)).unwrap();
        std::fs::write(folder.path(&format!("{name}/faq.md")), text).unwrap();
    };
    write_version("..2026_11_24_10_00_00.1", "# FAQ\n\nFirst answer.\n");
    std::os::unix::fs::symlink("..2026_11_24_10_00_00.1", folder.path("..data")).unwrap();
    std::os::unix::fs::symlink("..data/faq.md", folder.path("faq.md")).unwrap();
    let (mut watcher, mut output) = folder.watcher(0, 1000);
    let outcome = within_deadline(watcher.scan(Some(Instant::now()))).unwrap();
    assert!(outcome.reported.is_empty(), "{:?}", outcome.reported);
    assert_eq!(
        sent(&mut output),
        [("faq".into(), Some("# FAQ\n\nFirst answer.\n".to_owned()))],
        "one document, under the link's name; the hidden folders are not documents"
    );

    // The kubelet's update: a new folder, a new link renamed over `..data`, the old folder
    // removed. The same file name now reads the new content.
    write_version(
        "..2026_11_24_10_05_00.2",
        "# FAQ\n\nSecond answer, longer.\n",
    );
    std::os::unix::fs::symlink("..2026_11_24_10_05_00.2", folder.path("..data_tmp")).unwrap();
    std::fs::rename(folder.path("..data_tmp"), folder.path("..data")).unwrap();
    std::fs::remove_dir_all(folder.path("..2026_11_24_10_00_00.1")).unwrap();
    within_deadline(watcher.scan(Some(Instant::now()))).unwrap();
    assert_eq!(
        sent(&mut output),
        [(
            "faq".into(),
            Some("# FAQ\n\nSecond answer, longer.\n".to_owned())
        )]
    );
}
