//! The allocator of the `braid` binary and its settings; `braid-bench` includes this
//! file (`#[path]`), so that its numbers are those of the shipped allocator.

/// mimalloc instead of glibc's malloc: windows of rows are allocated on one worker
/// and freed on another, and glibc returned that memory to the kernel and faulted it
/// back in for every window (about 250 k page faults per 8 M rows on 2 workers).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's option number of `purge_delay` (`mi_option_purge_delay` in the
/// `mi_option_e` enum of mimalloc v3's `mimalloc.h`, which `libmimalloc-sys` builds but
/// does not name).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// mimalloc's option number of `arena_eager_commit` (as [`MI_OPTION_PURGE_DELAY`]).
const MI_OPTION_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// Keeps freed memory 10 s before giving it back to the kernel (mimalloc's default is
/// 1 s), unless `MIMALLOC_PURGE_DELAY` says otherwise. Windows of rows are made on one
/// thread and freed on another all the time; pages given back after a second were
/// faulted in and zeroed again (`clear_page_erms`, a tenth of a Linear Road rating's
/// samples). Measured on the L = 512 rating: 54 -> 46 CPU s, peak RSS +5%.
///
/// And commits arena memory as it is used, not eagerly in large (transparent huge page)
/// runs, unless `MIMALLOC_ARENA_EAGER_COMMIT` says otherwise: on this kind of VM a
/// fresh huge page is zeroed (and backed by the host) whole. The L = 512 rating at
/// speed 1000 (one pair each, kernel CPU s): 26 -> 7, 24 -> 6 in one hour, 26 -> 17
/// and 18 in a slower one; the peer benchmark's `hop` on 2 workers 0.63 -> 0.48 s
/// (medians of 7), peak RSS 66 -> 48 MB.
pub(crate) fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one of mimalloc's options (a plain integer it reads when it
        // next purges); any value is valid.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 10_000) };
    }
}

/// Sets `arena_eager_commit` (see [`keep_freed_memory`]) before anything is allocated:
/// mimalloc reserves its first arena at the first allocation, before `main`.
#[used]
#[link_section = ".init_array"]
static COMMIT_AS_USED: extern "C" fn() = commit_as_used;

extern "C" fn commit_as_used() {
    unsafe extern "C" {
        fn getenv(name: *const std::ffi::c_char) -> *mut std::ffi::c_char;
    }
    // SAFETY: getenv reads the environment (nothing writes it yet) and allocates
    // nothing; the option is a plain integer mimalloc reads when it makes an arena.
    unsafe {
        if getenv(c"MIMALLOC_ARENA_EAGER_COMMIT".as_ptr()).is_null() {
            libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_EAGER_COMMIT, 0);
        }
    }
}
