//! The system calls the storage layer makes beyond `std`, in one place:
//! page-cache hints (`sync_file_range`, `posix_fadvise`), `sendfile` and
//! `cachestat`. Linux has them all. Elsewhere the hints do nothing,
//! `sendfile` becomes a `pread` and a `write`, and whether a range is
//! cached cannot be told.

pub(crate) use imp::{is_range_cached, send_file, start_writeback, write_out_and_drop};

#[cfg(target_os = "linux")]
mod imp {
    use std::fs::File;
    use std::io;
    use std::os::fd::{AsRawFd, BorrowedFd};

    fn check(result: libc::c_int) -> io::Result<()> {
        if result == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    fn offset(value: u64) -> io::Result<libc::off64_t> {
        libc::off64_t::try_from(value).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
    }

    /// `sync_file_range(SYNC_FILE_RANGE_WRITE)`: starts writeback, does not wait.
    pub(crate) fn start_writeback(file: &File, start: u64, length: u64) -> io::Result<()> {
        let (start, length) = (offset(start)?, offset(length)?);
        // SAFETY: a plain system call on a descriptor `file` keeps open.
        check(unsafe {
            libc::sync_file_range(file.as_raw_fd(), start, length, libc::SYNC_FILE_RANGE_WRITE)
        })
    }

    /// Writes the range out (waiting for it) and drops it from the cache.
    pub(crate) fn write_out_and_drop(file: &File, start: u64, length: u64) -> io::Result<()> {
        let (start, length) = (offset(start)?, offset(length)?);
        let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | libc::SYNC_FILE_RANGE_WRITE
            | libc::SYNC_FILE_RANGE_WAIT_AFTER;
        // SAFETY: a plain system call on a descriptor `file` keeps open.
        check(unsafe { libc::sync_file_range(file.as_raw_fd(), start, length, flags) })?;
        // posix_fadvise returns the error number instead of setting errno.
        // SAFETY: as above.
        let error = unsafe {
            libc::posix_fadvise(file.as_raw_fd(), start, length, libc::POSIX_FADV_DONTNEED)
        };
        if error == 0 {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(error))
        }
    }

    /// One `sendfile` of up to `count` bytes of `file` from `position` to
    /// `out`; how many bytes went (0 at the end of the file).
    pub(crate) fn send_file(
        out: BorrowedFd<'_>,
        file: &File,
        position: u64,
        count: usize,
    ) -> io::Result<usize> {
        let mut position = libc::off_t::try_from(position)
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: both descriptors are open for the duration of the call
        // (`out` is borrowed, `file` referenced), `position` is a valid,
        // exclusively borrowed `off_t` the kernel updates, and no user
        // memory is read or written.
        let moved =
            unsafe { libc::sendfile(out.as_raw_fd(), file.as_raw_fd(), &mut position, count) };
        usize::try_from(moved).map_err(|_| io::Error::last_os_error())
    }

    /// Whether every page of `length` bytes from `position` is in the page
    /// cache (one `cachestat`, Linux 6.5 and later); `None` when the kernel
    /// cannot tell.
    pub(crate) fn is_range_cached(file: &File, position: u64, length: u64) -> Option<bool> {
        /// `cachestat` has this number on every Linux architecture.
        const SYS_CACHESTAT: libc::c_long = 451;
        #[repr(C)]
        struct CachestatRange {
            offset: u64,
            length: u64,
        }
        #[repr(C)]
        #[derive(Default)]
        struct Cachestat {
            cached: u64,
            dirty: u64,
            writeback: u64,
            evicted: u64,
            recently_evicted: u64,
        }
        if length == 0 {
            return Some(true);
        }
        let range = CachestatRange {
            offset: position,
            length,
        };
        let mut stat = Cachestat::default();
        // SAFETY: the descriptor is open (`file` is referenced), `range` and
        // `stat` are valid, laid out as the kernel's `struct
        // cachestat_range` and `struct cachestat` (`#[repr(C)]`) and live
        // for the call; the kernel only writes `stat`.
        let result = unsafe {
            libc::syscall(
                SYS_CACHESTAT,
                file.as_raw_fd(),
                &range as *const CachestatRange,
                &mut stat as *mut Cachestat,
                0,
            )
        };
        if result != 0 {
            return None;
        }
        // SAFETY: `sysconf` has no preconditions.
        let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|&size| size > 0)
            .unwrap_or(4096);
        let pages = (position + length).div_ceil(page) - position / page;
        Some(stat.cached >= pages)
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::fs::File;
    use std::io;
    use std::os::fd::{AsRawFd, BorrowedFd};
    use std::os::unix::fs::FileExt;

    pub(crate) fn start_writeback(_file: &File, _start: u64, _length: u64) -> io::Result<()> {
        Ok(())
    }

    pub(crate) fn write_out_and_drop(_file: &File, _start: u64, _length: u64) -> io::Result<()> {
        Ok(())
    }

    /// `sendfile` as a `pread` of up to 64 KiB and one `write` to `out`;
    /// how many bytes went (0 at the end of the file).
    pub(crate) fn send_file(
        out: BorrowedFd<'_>,
        file: &File,
        position: u64,
        count: usize,
    ) -> io::Result<usize> {
        let mut buffer = vec![0u8; count.min(64 * 1024)];
        let read = file.read_at(&mut buffer, position)?;
        if read == 0 {
            return Ok(0);
        }
        // SAFETY: `out` is open for the call and `buffer` holds `read`
        // initialised bytes.
        let written = unsafe { libc::write(out.as_raw_fd(), buffer.as_ptr().cast(), read) };
        usize::try_from(written).map_err(|_| io::Error::last_os_error())
    }

    pub(crate) fn is_range_cached(_file: &File, _position: u64, _length: u64) -> Option<bool> {
        None
    }
}
