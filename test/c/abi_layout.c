/*
 * abi_layout.c: the type half of the drift test. test/c/abi_check.sh builds it twice, with
 * CRuby's gc/gc.h (-DABI_LAYOUT_FROM_CRUBY) and with Mosaic's src/core/gc_abi.h, runs both and
 * compares what they print: the size of struct rb_gc_vm_context, the offset and size of each
 * member, the size of enum rb_gc_vm_weak_tables and the value of each of its constants. A
 * constant gc_abi.h lacks does not compile; one CRuby adds moves RB_GC_VM_WEAK_TABLE_COUNT.
 */
#include <stddef.h>
#include <stdio.h>

#ifdef ABI_LAYOUT_FROM_CRUBY
# include "ruby/ruby.h"
# include "gc/gc.h"
#else
# include "core/gc_abi.h"
#endif

#define MEMBER(type, m) \
    printf(#type "." #m ": offset %zu, size %zu\n", offsetof(type, m), sizeof(((type *)0)->m))
#define CONSTANT(c) printf(#c " = %ld\n", (long)(c))

int
main(void)
{
    printf("struct rb_gc_vm_context: size %zu\n", sizeof(struct rb_gc_vm_context));
    MEMBER(struct rb_gc_vm_context, lock);
    MEMBER(struct rb_gc_vm_context, ec);
    printf("enum rb_gc_vm_weak_tables: size %zu\n", sizeof(enum rb_gc_vm_weak_tables));
    CONSTANT(RB_GC_VM_CI_TABLE);
    CONSTANT(RB_GC_VM_OVERLOADED_CME_TABLE);
    CONSTANT(RB_GC_VM_GLOBAL_SYMBOLS_TABLE);
    CONSTANT(RB_GC_VM_GENERIC_IV_TABLE);
    CONSTANT(RB_GC_VM_FROZEN_STRINGS_TABLE);
    CONSTANT(RB_GC_VM_WEAK_TABLE_COUNT);
    return 0;
}
