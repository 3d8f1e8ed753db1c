/*
 * load_check.c: the check, when Ruby loads the library, that the running Ruby is one it was
 * built for.
 *
 * Owns: a constructor that compares the Ruby API version the library was compiled against
 * (RUBY_API_VERSION_MAJOR and _MINOR of the headers it was built with, 3.4) with the running
 * Ruby's (ruby_api_version, exported by every Ruby), and on a difference prints one line that
 * says which Ruby each is and how to rebuild, then exits 1.
 *
 * Why a constructor: it runs inside the dlopen of Ruby's loader (ruby_modular_gc_init), before
 * the loader looks up any rb_gc_impl_* function and before the VM calls one, so a library of
 * another Ruby's interface is refused before a missing or different entry point can abort the
 * loader or crash the VM. Ruby's loader itself reports its failures there with fprintf and
 * exit(1); this does the same. Nothing of Mosaic has started: no thread, no memory, no atexit.
 *
 * What it cannot catch: a library that references a symbol the running Ruby lacks does not get
 * this far; dlopen fails and Ruby's loader prints the undefined symbol and exits 1.
 *
 * The API version, not the full version: patch releases of one Ruby keep the interface (the
 * rule Ruby applies to C extensions), so a library built against 3.4.5's headers runs on 3.4.x.
 */
#define _GNU_SOURCE 1   /* dladdr; the value Ruby's config.h gives it too */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/gc_abi.h"

/* The Ruby the library was built for: its API version from the headers, and its full version
 * (the Makefile passes the building Ruby's RUBY_VERSION) for the message. The drift test
 * (test/c/abi_check.sh) compiles this file with other values to see the refusal. */
#ifndef MOSAIC_BUILT_API_MAJOR
# define MOSAIC_BUILT_API_MAJOR RUBY_API_VERSION_MAJOR
#endif
#ifndef MOSAIC_BUILT_API_MINOR
# define MOSAIC_BUILT_API_MINOR RUBY_API_VERSION_MINOR
#endif
#define MOSAIC_STR_(x) #x
#define MOSAIC_STR(x) MOSAIC_STR_(x)
#ifndef MOSAIC_BUILT_RUBY_VERSION
# define MOSAIC_BUILT_RUBY_VERSION MOSAIC_STR(MOSAIC_BUILT_API_MAJOR) "." MOSAIC_STR(MOSAIC_BUILT_API_MINOR)
#endif

/* Weak: a process without them (not a Ruby, or a Ruby that stopped exporting them) is refused
 * with a message rather than failing to load with an undefined symbol. */
extern const int ruby_api_version[3] __attribute__((weak));
extern const char ruby_version[] __attribute__((weak));

__attribute__((constructor)) static void
mosaic_load_check(void)
{
    if (ruby_api_version && ruby_api_version[0] == MOSAIC_BUILT_API_MAJOR &&
        ruby_api_version[1] == MOSAIC_BUILT_API_MINOR) return;

    /* The library's own file name, as the loader opened it (librubygc.<name>.so). */
    Dl_info info;
    const char *library = "librubygc.mosaic.so";
    if (dladdr((void *)mosaic_load_check, &info) && info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        library = slash ? slash + 1 : info.dli_fname;
    }
    fprintf(stderr,
            "[mosaic] %s was built for Ruby %s and this is Ruby %s: rebuild it for "
            "this Ruby (make install RUBY=/path/to/this/bin/ruby; Mosaic needs Ruby %d.%d)\n",
            library, MOSAIC_BUILT_RUBY_VERSION,
            ruby_version ? ruby_version : "of unknown version",
            MOSAIC_BUILT_API_MAJOR, MOSAIC_BUILT_API_MINOR);
    exit(1);
}
