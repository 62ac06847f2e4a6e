//! fdatasync on a thread that never takes the GIL (reference: `sidewinder.store.flush.ThreadSyncer`).
//!
//! The loop asks for one round at a time (`sync`), the thread syncs each file descriptor and
//! then writes 1 to the eventfd the loop watches; the loop reads the round's outcome (`outcome`).
//! A Python thread doing the same waits for the GIL twice per round: once to start, while the
//! loop finishes the request that asked, and once after the fdatasync.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

#[derive(Default)]
struct State {
    asked: Option<Vec<i32>>,
    // errno of the last round (0: every fdatasync succeeded); None while one runs.
    outcome: Option<i32>,
    rounds: u64,
    busy: bool, // asked and not finished
    stop: bool,
    exited: bool,
}

type Shared = Arc<(Mutex<State>, Condvar)>;

#[pyclass(module = "sidewinder._native")]
pub struct Syncer {
    shared: Shared,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// A syscall's result, retried while a signal interrupts it (-1 and errno otherwise).
fn retrying(call: impl Fn() -> isize) -> Result<isize, i32> {
    loop {
        let result = call();
        if result >= 0 {
            return Ok(result);
        }
        let errno = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        if errno != libc::EINTR {
            return Err(errno);
        }
    }
}

fn run(shared: Shared, notify_fd: i32) {
    // Signals are the Python main thread's to take: none interrupts a sync here.
    // SAFETY: a zeroed sigset filled by sigfillset, applied to this thread only.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
    let (lock, wake) = &*shared;
    loop {
        let fds = {
            let mut state = lock.lock().unwrap();
            loop {
                // A round asked for is synced and answered even when a stop follows it.
                if let Some(fds) = state.asked.take() {
                    break fds;
                }
                if state.stop {
                    state.exited = true;
                    wake.notify_all();
                    return;
                }
                state = wake.wait(state).unwrap();
            }
        };
        let mut errno = 0;
        for fd in fds {
            // SAFETY: a plain syscall on a descriptor number; the caller keeps it open.
            if let Err(error) = retrying(|| unsafe { libc::fdatasync(fd) } as isize) {
                errno = error;
                break;
            }
        }
        {
            let mut state = lock.lock().unwrap();
            state.outcome = Some(errno);
            state.rounds += 1;
            state.busy = false;
        }
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to the eventfd, which the Python side keeps
        // open until this thread has exited. A full counter (EAGAIN) still leaves it readable,
        // which is all the loop needs.
        let _ = retrying(|| unsafe { libc::write(notify_fd, (&one as *const u64).cast(), 8) });
    }
}

#[pymethods]
impl Syncer {
    /// A syncer whose thread (named `name`) writes to eventfd `notify_fd` after each round.
    #[new]
    fn new(notify_fd: i32, name: &str) -> PyResult<Self> {
        let shared: Shared = Arc::default();
        let theirs = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(name.chars().take(15).collect())
            .spawn(move || run(theirs, notify_fd))
            .map_err(|e| PyRuntimeError::new_err(format!("cannot start the sync thread: {e}")))?;
        Ok(Syncer {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Start a round: fdatasync each descriptor in turn. One round at a time.
    fn sync(&self, fds: Vec<i32>) -> PyResult<()> {
        let (lock, wake) = &*self.shared;
        let mut state = lock.lock().unwrap();
        if state.stop {
            return Err(PyRuntimeError::new_err("the syncer is stopped"));
        }
        if state.busy {
            return Err(PyRuntimeError::new_err("a sync round is already under way"));
        }
        state.asked = Some(fds);
        state.outcome = None;
        state.busy = true;
        wake.notify_all();
        Ok(())
    }

    /// The finished round's errno (0: synced), None while it runs (or before the first).
    fn outcome(&self) -> Option<i32> {
        self.shared.0.lock().unwrap().outcome
    }

    /// Rounds finished, ever.
    #[getter]
    fn rounds(&self) -> u64 {
        self.shared.0.lock().unwrap().rounds
    }

    /// Stop the thread once the round asked for or under way is done (its eventfd written);
    /// false when it is still in an fdatasync after `timeout_s` (it stops after that one, and
    /// the eventfd must then stay open). Releases the GIL while it waits.
    fn stop(&self, py: Python<'_>, timeout_s: f64) -> bool {
        let shared = Arc::clone(&self.shared);
        let exited = py.detach(move || {
            let (lock, wake) = &*shared;
            let wait = Duration::try_from_secs_f64(timeout_s.max(0.0)).unwrap_or(Duration::MAX);
            let deadline = Instant::now().checked_add(wait);
            let mut state = lock.lock().unwrap();
            state.stop = true;
            wake.notify_all();
            while !state.exited {
                let Some(deadline) = deadline else {
                    state = wake.wait(state).unwrap();
                    continue;
                };
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return false;
                }
                state = wake.wait_timeout(state, left).unwrap().0;
            }
            true
        });
        if exited {
            if let Some(thread) = self.thread.lock().unwrap().take() {
                let _ = thread.join();
            }
        }
        exited
    }
}
