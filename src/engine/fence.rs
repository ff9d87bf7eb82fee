//! One server per data volume: the lock every process that writes a Database's data volume
//! holds while it runs.
//!
//! A Deployment's `Recreate` strategy orders rollouts only. When a database pod is deleted or
//! evicted, its ReplicaSet creates the replacement at once, while the old server may still be
//! shutting down (or stuck) for its whole grace period; a ReadWriteOnce volume is shared by
//! every pod on its node, so both would open one data directory, and two servers on one data
//! directory corrupt it. So the database container, and the restore's init container that
//! writes into the volume, start as a shell that locks the mount point of the data volume
//! (`flock(2)` on the directory, an exclusive lock the kernel drops when the last process
//! holding it exits, however it exits) before it runs anything else, and then `exec`s the
//! server, which inherits the locked descriptor: every process of the server holds it, and it
//! is free once the last of them is gone. A second container waits, saying so in its log, and
//! a SIGTERM ends the wait at once.
//!
//! The lock is per node, which is where a ReadWriteOnce volume can be shared; across nodes the
//! attach-detach controller keeps a ReadWriteOnce volume on one node at a time. An image
//! without `flock` (util-linux or busybox) is refused with a message in its log: a server never
//! starts unfenced.

/// The descriptor that holds the lock, in the shell and every process it `exec`s.
const LOCK_FD: u8 = 9;

/// The container's command line: `sh -c`, locking `data_dir` and then running `script`
/// (whose last line `exec`s the server, so that the server is PID 1 and holds the lock).
pub(crate) fn fenced(data_dir: &str, script: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), format!("{}\n{script}", lock_script(data_dir))]
}

/// The lines that take the lock: the directory opened on [`LOCK_FD`], locked at once when it
/// is free, else after a line that says why this container waits.
fn lock_script(data_dir: &str) -> String {
    let fd = LOCK_FD;
    let dir = shell_quote(data_dir);
    format!(
        r#"command -v flock > /dev/null || {{ echo "this image has no flock (util-linux or busybox): the data volume cannot be locked, so no server starts on it" >&2; exit 1; }}
exec {fd}< {dir}
if ! flock -n {fd}; then
  trap 'kill $! 2> /dev/null; exit 143' TERM INT
  echo "the data volume {data_dir} is locked by another server of this Database: waiting until it stops" >&2
  flock {fd} & wait $! || exit 1
  trap - TERM INT
  echo "the data volume is free: starting" >&2
fi"#
    )
}

/// `s` as one word of a POSIX shell: in single quotes, with a single quote as `'\''`.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::io::Read;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use super::*;

    /// A directory of the test's own, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("fence-{}-{name}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn run(dir: &Path, script: &str) -> std::process::Child {
        let args = fenced(dir.to_str().unwrap(), script);
        Command::new(&args[0]).args(&args[1..]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
    }

    /// What `child` wrote first to its standard error; the pipe stays open for the rest.
    fn first_words(child: &mut std::process::Child) -> String {
        let mut words = [0u8; 200];
        let n = child.stderr.as_mut().unwrap().read(&mut words).unwrap();
        String::from_utf8_lossy(&words[..n]).into_owned()
    }

    fn output(child: std::process::Child) -> (Option<i32>, String, String) {
        let out = child.wait_with_output().unwrap();
        (out.status.code(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
    }

    #[test]
    fn a_free_volume_starts_the_server_at_once_and_the_server_holds_the_lock() {
        let dir = TempDir::new("free");
        // The "server" tries the lock itself through a descriptor of its own: it is taken.
        let server = format!(
            "exec sh -c 'flock -n {} true && echo free || echo held'",
            shell_quote(dir.path().to_str().unwrap())
        );
        let (code, stdout, stderr) = output(run(dir.path(), &server));
        assert_eq!((code, stdout.as_str(), stderr.as_str()), (Some(0), "held\n", ""));
        // Once every process holding it exited, the lock is free again.
        let lock = File::open(dir.path()).unwrap();
        assert!(lock.try_lock().is_ok());
    }

    #[test]
    fn a_second_server_waits_until_the_first_lets_go_and_says_so() {
        let dir = TempDir::new("second");
        let first = File::open(dir.path()).unwrap();
        first.lock().unwrap();
        let mut second = run(dir.path(), "echo started");
        // While the first holds the lock, the second has not started; it says why in its log.
        let waiting = first_words(&mut second);
        assert!(waiting.contains("is locked by another server of this Database: waiting"), "{waiting}");
        assert!(second.try_wait().unwrap().is_none(), "the second server runs only once the lock is free");
        drop(first);
        let out = second.wait_with_output().unwrap();
        assert!(out.status.success());
        assert_eq!(String::from_utf8(out.stdout).unwrap(), "started\n");
    }

    #[test]
    fn sigterm_ends_the_wait_at_once() {
        let dir = TempDir::new("sigterm");
        let first = File::open(dir.path()).unwrap();
        first.lock().unwrap();
        let mut second = run(dir.path(), "echo started");
        assert!(first_words(&mut second).contains("waiting"));
        Command::new("kill").args(["-TERM", &second.id().to_string()]).status().unwrap();
        // The first still holds the lock: only the signal can end the wait.
        let asked = Instant::now();
        while second.try_wait().unwrap().is_none() && asked.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let exited = second.try_wait().unwrap();
        drop(first);
        let (code, stdout, _) = output(second);
        assert!(exited.is_some(), "SIGTERM did not end the wait");
        assert_eq!((code, stdout.as_str()), (Some(143), ""));
    }

    #[test]
    fn any_directory_name_is_one_word() {
        assert_eq!(shell_quote("/data/it's"), r"'/data/it'\''s'");
        let dir = TempDir::new("odd");
        let odd = dir.path().join("a b'c");
        std::fs::create_dir(&odd).unwrap();
        let (code, stdout, _) = output(run(&odd, "echo started"));
        assert_eq!((code, stdout.as_str()), (Some(0), "started\n"));
    }
}
