/*
 * gc_abi.h: Mosaic's own declaration of CRuby 3.4's Modular GC interface, so that Mosaic builds
 * with an installed Ruby's headers alone. CRuby installs neither gc/gc.h nor gc/gc_impl.h
 * (they are in its source tree only); this file declares, from the 3.4 ABI:
 *  - what Mosaic calls of the VM: the functions CRuby 3.4 exports to a GC library (gc/gc.h;
 *    only those Mosaic uses), with their types, and two VM functions that are exported but
 *    declared only in CRuby's internal headers;
 *  - every rb_gc_impl_* function a 3.4 GC library must define (gc/gc_impl.h, all 63: the VM
 *    refuses a library that lacks one), marked for export.
 *
 * Invariant: each declaration here is CRuby 3.4's. The drift test, test/c/abi_check.sh (make
 * test-c), compiles this file in one translation unit with CRuby 3.4.5's gc/gc.h, gc/gc_impl.h
 * and the two internal headers (a prototype that differs does not compile); checks that every
 * rb_gc_impl_* of gc_impl.h is declared here and no other, that CRuby declares and the Ruby
 * exports every VM function declared here, that the types below have CRuby's layout and
 * constants, and that the library exports exactly gc_impl.h's rb_gc_impl_* functions.
 */
#ifndef MOSAIC_GC_ABI_H
#define MOSAIC_GC_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ruby/ruby.h"
#include "ruby/version.h"
#include "ruby/thread_native.h"

/* The build's refusals (scripts/ruby-check.sh) say the same earlier, in one line each. */
#if RUBY_API_VERSION_MAJOR != 3 || RUBY_API_VERSION_MINOR != 4
# error "Mosaic implements the Modular GC interface of Ruby 3.4; these are another Ruby's headers"
#endif
#if !USE_MODULAR_GC
# error "this Ruby was configured without modular GC: rebuild it with ./configure --with-modular-gc=DIR"
#endif

/* ------------------------------------------------------------ VM types (gc/gc.h) */

/* Callbacks of rb_gc_vm_weak_table_foreach: the first says, for an entry's value, whether to
 * keep it (ST_CONTINUE), delete it (ST_DELETE) or update it (ST_REPLACE, then the second is
 * called with a pointer to the value). C allows a typedef to be repeated with the same type, so
 * the drift test's translation unit compares these with gc/gc.h's. */
typedef int (*vm_table_foreach_callback_func)(VALUE value, void *data);
typedef int (*vm_table_update_callback_func)(VALUE *value, void *data);

/* A struct or an enum cannot be defined twice in one translation unit: the drift test includes
 * CRuby's gc/gc.h, which defines these, with MOSAIC_ABI_TYPES_FROM_CRUBY, and compares their
 * layouts and constants with the ones below in programs of their own (test/c/abi_layout.c). */
#ifndef MOSAIC_ABI_TYPES_FROM_CRUBY

/* What a GC thread that is not a Ruby thread needs to take the VM lock and to run the VM's
 * mark functions (rb_gc_worker_thread_set_vm_context). */
struct rb_gc_vm_context {
    rb_nativethread_lock_t lock;
    struct rb_execution_context_struct *ec;
};

/* The VM's tables whose entries do not keep their objects alive. */
enum rb_gc_vm_weak_tables {
    RB_GC_VM_CI_TABLE,
    RB_GC_VM_OVERLOADED_CME_TABLE,
    RB_GC_VM_GLOBAL_SYMBOLS_TABLE,
    RB_GC_VM_GENERIC_IV_TABLE,
    RB_GC_VM_FROZEN_STRINGS_TABLE,
    RB_GC_VM_WEAK_TABLE_COUNT
};

#endif /* MOSAIC_ABI_TYPES_FROM_CRUBY */

/* ------------------------------------------------------- VM functions (gc/gc.h) */

/* Locks: the VM lock (with and without the barrier that stops the other Ractors), the barrier
 * alone. The lock functions return the level to hand back to the unlock. */
unsigned int rb_gc_vm_lock(void);
void rb_gc_vm_unlock(unsigned int lev);
unsigned int rb_gc_vm_lock_no_barrier(void);
void rb_gc_vm_unlock_no_barrier(unsigned int lev);
void rb_gc_vm_barrier(void);

/* GC threads: a context initialised once, set on a thread while it runs VM code. */
void rb_gc_initialize_vm_context(struct rb_gc_vm_context *context);
void rb_gc_worker_thread_set_vm_context(struct rb_gc_vm_context *context);
void rb_gc_worker_thread_unset_vm_context(struct rb_gc_vm_context *context);

/* Objects: the size an object would best live in, its references marked, updated after a
 * compaction, its resources freed (false: it has a finalizer to run first, a zombie), its
 * entries in the VM's weak tables removed; shapes across a move between size classes. */
size_t rb_gc_obj_optimal_size(VALUE obj);
void rb_gc_mark_children(void *objspace, VALUE obj);
void rb_gc_update_object_references(void *objspace, VALUE obj);
bool rb_gc_obj_free(void *objspace, VALUE obj);
void rb_gc_obj_free_vm_weak_references(VALUE obj);
uint32_t rb_gc_get_shape(VALUE obj);
void rb_gc_set_shape(VALUE obj, uint32_t shape_id);
uint32_t rb_gc_rebuild_shape(VALUE obj, size_t heap_id);
void rb_gc_prepare_heap_process_object(VALUE obj);

/* Roots, the VM's own references after a compaction, its weak tables. */
void rb_gc_save_machine_context(void);
void rb_gc_mark_roots(void *objspace, const char **categoryp);
void rb_gc_update_vm_references(void *objspace);
void rb_gc_vm_weak_table_foreach(vm_table_foreach_callback_func callback,
                                 vm_table_update_callback_func update_callback, void *data,
                                 enum rb_gc_vm_weak_tables table);
void rb_objspace_reachable_objects_from_root(void (func)(const char *category, VALUE, void *),
                                             void *passing_data);
void rb_gc_ractor_newobj_cache_foreach(void (*func)(void *cache, void *data), void *data);
void rb_ractor_finish_marking(void);

/* Events, finalizers, interrupts, the state of the process. */
void rb_gc_event_hook(VALUE obj, rb_event_flag_t event);
void *rb_gc_get_objspace(void);
void rb_gc_run_obj_finalizer(VALUE objid, long count, VALUE (*callback)(long i, void *data),
                             void *data);
bool rb_gc_shutdown_call_finalizer_p(VALUE obj);
void rb_gc_set_pending_interrupt(void);
void rb_gc_unset_pending_interrupt(void);
bool ruby_free_at_exit_p(void);
bool rb_memerror_reentered(void);

/* ------------------------------ VM functions declared in CRuby's internal headers only */

/* Re-keys an object's generic instance variables when it moves (internal/variable.h). */
void rb_mv_generic_ivar(VALUE src, VALUE dst);
/* Whether the calling thread holds the GVL (internal/thread.h). */
int ruby_thread_has_gvl_p(void);

/* ------------------------------------------- the library's entry points (gc/gc_impl.h) */

/* The VM finds each of these by dlsym: exported whatever the build's default visibility. */
#define MOSAIC_GC_IMPL __attribute__((visibility("default")))

/* Boot */
MOSAIC_GC_IMPL void *rb_gc_impl_objspace_alloc(void);
MOSAIC_GC_IMPL void rb_gc_impl_objspace_init(void *objspace_ptr);
MOSAIC_GC_IMPL void rb_gc_impl_objspace_free(void *objspace_ptr);
MOSAIC_GC_IMPL void *rb_gc_impl_ractor_cache_alloc(void *objspace_ptr, void *ractor);
MOSAIC_GC_IMPL void rb_gc_impl_ractor_cache_free(void *objspace_ptr, void *cache);
MOSAIC_GC_IMPL void rb_gc_impl_set_params(void *objspace_ptr);
MOSAIC_GC_IMPL void rb_gc_impl_init(void);
MOSAIC_GC_IMPL size_t *rb_gc_impl_heap_sizes(void *objspace_ptr);
/* Shutdown */
MOSAIC_GC_IMPL void rb_gc_impl_shutdown_free_objects(void *objspace_ptr);
/* Collections */
MOSAIC_GC_IMPL void rb_gc_impl_start(void *objspace_ptr, bool full_mark, bool immediate_mark,
                                     bool immediate_sweep, bool compact);
MOSAIC_GC_IMPL bool rb_gc_impl_during_gc_p(void *objspace_ptr);
MOSAIC_GC_IMPL void rb_gc_impl_prepare_heap(void *objspace_ptr);
MOSAIC_GC_IMPL void rb_gc_impl_gc_enable(void *objspace_ptr);
MOSAIC_GC_IMPL void rb_gc_impl_gc_disable(void *objspace_ptr, bool finish_current_gc);
MOSAIC_GC_IMPL bool rb_gc_impl_gc_enabled_p(void *objspace_ptr);
MOSAIC_GC_IMPL void rb_gc_impl_stress_set(void *objspace_ptr, VALUE flag);
MOSAIC_GC_IMPL VALUE rb_gc_impl_stress_get(void *objspace_ptr);
MOSAIC_GC_IMPL VALUE rb_gc_impl_config_get(void *objspace_ptr);
MOSAIC_GC_IMPL void rb_gc_impl_config_set(void *objspace_ptr, VALUE hash);
/* Allocation */
MOSAIC_GC_IMPL VALUE rb_gc_impl_new_obj(void *objspace_ptr, void *cache_ptr, VALUE klass,
                                        VALUE flags, VALUE v1, VALUE v2, VALUE v3,
                                        bool wb_protected, size_t alloc_size);
MOSAIC_GC_IMPL size_t rb_gc_impl_obj_slot_size(VALUE obj);
MOSAIC_GC_IMPL size_t rb_gc_impl_heap_id_for_size(void *objspace_ptr, size_t size);
MOSAIC_GC_IMPL bool rb_gc_impl_size_allocatable_p(size_t size);
/* malloc: called with or without the GVL; NULL (errno set) when the memory cannot be had */
MOSAIC_GC_IMPL void *rb_gc_impl_malloc(void *objspace_ptr, size_t size);
MOSAIC_GC_IMPL void *rb_gc_impl_calloc(void *objspace_ptr, size_t size);
MOSAIC_GC_IMPL void *rb_gc_impl_realloc(void *objspace_ptr, void *ptr, size_t new_size,
                                        size_t old_size);
MOSAIC_GC_IMPL void rb_gc_impl_free(void *objspace_ptr, void *ptr, size_t old_size);
MOSAIC_GC_IMPL void rb_gc_impl_adjust_memory_usage(void *objspace_ptr, ssize_t diff);
/* Marking */
MOSAIC_GC_IMPL void rb_gc_impl_mark(void *objspace_ptr, VALUE obj);
MOSAIC_GC_IMPL void rb_gc_impl_mark_and_move(void *objspace_ptr, VALUE *ptr);
MOSAIC_GC_IMPL void rb_gc_impl_mark_and_pin(void *objspace_ptr, VALUE obj);
MOSAIC_GC_IMPL void rb_gc_impl_mark_maybe(void *objspace_ptr, VALUE obj);
MOSAIC_GC_IMPL void rb_gc_impl_mark_weak(void *objspace_ptr, VALUE *ptr);
MOSAIC_GC_IMPL void rb_gc_impl_remove_weak(void *objspace_ptr, VALUE parent_obj, VALUE *ptr);
/* Compaction */
MOSAIC_GC_IMPL bool rb_gc_impl_object_moved_p(void *objspace_ptr, VALUE obj);
MOSAIC_GC_IMPL VALUE rb_gc_impl_location(void *objspace_ptr, VALUE value);
/* Write barriers */
MOSAIC_GC_IMPL void rb_gc_impl_writebarrier(void *objspace_ptr, VALUE a, VALUE b);
MOSAIC_GC_IMPL void rb_gc_impl_writebarrier_unprotect(void *objspace_ptr, VALUE obj);
MOSAIC_GC_IMPL void rb_gc_impl_writebarrier_remember(void *objspace_ptr, VALUE obj);
/* Heap walks */
MOSAIC_GC_IMPL void rb_gc_impl_each_objects(void *objspace_ptr,
                                            int (*callback)(void *, void *, size_t, void *),
                                            void *data);
MOSAIC_GC_IMPL void rb_gc_impl_each_object(void *objspace_ptr,
                                           void (*func)(VALUE obj, void *data), void *data);
/* Finalizers */
MOSAIC_GC_IMPL void rb_gc_impl_make_zombie(void *objspace_ptr, VALUE obj, void (*dfree)(void *),
                                           void *data);
MOSAIC_GC_IMPL VALUE rb_gc_impl_define_finalizer(void *objspace_ptr, VALUE obj, VALUE block);
MOSAIC_GC_IMPL void rb_gc_impl_undefine_finalizer(void *objspace_ptr, VALUE obj);
MOSAIC_GC_IMPL void rb_gc_impl_copy_finalizer(void *objspace_ptr, VALUE dest, VALUE obj);
MOSAIC_GC_IMPL void rb_gc_impl_shutdown_call_finalizer(void *objspace_ptr);
/* Object ids */
MOSAIC_GC_IMPL VALUE rb_gc_impl_object_id(void *objspace_ptr, VALUE obj);
MOSAIC_GC_IMPL VALUE rb_gc_impl_object_id_to_ref(void *objspace_ptr, VALUE object_id);
/* fork */
MOSAIC_GC_IMPL void rb_gc_impl_before_fork(void *objspace_ptr);
MOSAIC_GC_IMPL void rb_gc_impl_after_fork(void *objspace_ptr, rb_pid_t pid);
/* Statistics */
MOSAIC_GC_IMPL void rb_gc_impl_set_measure_total_time(void *objspace_ptr, VALUE flag);
MOSAIC_GC_IMPL bool rb_gc_impl_get_measure_total_time(void *objspace_ptr);
MOSAIC_GC_IMPL unsigned long long rb_gc_impl_get_total_time(void *objspace_ptr);
MOSAIC_GC_IMPL size_t rb_gc_impl_gc_count(void *objspace_ptr);
MOSAIC_GC_IMPL VALUE rb_gc_impl_latest_gc_info(void *objspace_ptr, VALUE key);
MOSAIC_GC_IMPL VALUE rb_gc_impl_stat(void *objspace_ptr, VALUE hash_or_sym);
MOSAIC_GC_IMPL VALUE rb_gc_impl_stat_heap(void *objspace_ptr, VALUE heap_name,
                                          VALUE hash_or_sym);
MOSAIC_GC_IMPL const char *rb_gc_impl_active_gc_name(void);
/* The rest */
MOSAIC_GC_IMPL size_t rb_gc_impl_obj_flags(void *objspace_ptr, VALUE obj, ID *flags, size_t max);
MOSAIC_GC_IMPL bool rb_gc_impl_pointer_to_heap_p(void *objspace_ptr, const void *ptr);
MOSAIC_GC_IMPL bool rb_gc_impl_garbage_object_p(void *objspace_ptr, VALUE obj);
MOSAIC_GC_IMPL void rb_gc_impl_set_event_hook(void *objspace_ptr, const rb_event_flag_t event);
MOSAIC_GC_IMPL void rb_gc_impl_copy_attributes(void *objspace_ptr, VALUE dest, VALUE obj);

#endif /* MOSAIC_GC_ABI_H */
