/*
 * test/ext/mosaic_weak_probe.c: a test extension (built by test_weak.rb) whose dmark function
 * registers weak slots and removes some of them within the same mark phase, the way a WeakMap
 * deleted from between incremental-marking steps does (rb_gc_remove_weak, then the memory is
 * reused). It only reports raw slot words, never dereferences a slot.
 *
 * MosaicWeakProbe.new(n): n slots. #set(i, obj): slot i weakly refers to obj. #arm(dups): the
 * next mark phase registers every slot (the even ones `dups` times), then removes every even
 * slot and writes the word of #foreign(i, obj)'s object into it (an object the test let die),
 * then registers the odd slots once more.
 * #raw(i), #foreign_raw(i): the words. #undef?(i): slot i was cleared (Qundef).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "ruby/ruby.h"

/* rb_gc_mark_weak and rb_gc_remove_weak are not exported to extensions: call the loaded GC
 * library's entry points (rb_gc_impl_*) directly, as gc.c does, with Ruby's objspace. */
void *rb_gc_get_objspace(void);
static void (*impl_mark_weak)(void *objspace, VALUE *ptr);
static void (*impl_remove_weak)(void *objspace, VALUE parent, VALUE *ptr);

static int
find_gc_library(struct dl_phdr_info *info, size_t size, void *data)
{
    if (info->dlpi_name && strstr(info->dlpi_name, "/librubygc.")) {
        *(void **)data = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD);
        return 1;
    }
    return 0;
}
#define rb_gc_mark_weak(ptr) impl_mark_weak(rb_gc_get_objspace(), (ptr))
#define rb_gc_remove_weak(parent, ptr) impl_remove_weak(rb_gc_get_objspace(), (parent), (ptr))

struct probe {
    long n;
    VALUE *slots;
    VALUE *foreign;
    int dups;        /* > 0: the next mark registers and removes; 0: done */
    int done;        /* the even slots hold foreign words: never register them again */
};

static void
probe_mark(void *p)
{
    struct probe *pr = p;
    VALUE self = 0;
    for (long i = 0; i < pr->n; i++) {
        if (pr->done && i % 2 == 0) continue;
        if (RB_SPECIAL_CONST_P(pr->slots[i])) continue;
        int times = (pr->dups && i % 2 == 0) ? pr->dups : 1;
        for (int t = 0; t < times; t++) rb_gc_mark_weak(&pr->slots[i]);
    }
    if (pr->dups) {
        self = (VALUE)pr->slots[pr->n];  /* the owning object, kept here by probe_new */
        for (long i = 0; i < pr->n; i += 2) {
            rb_gc_remove_weak(self, &pr->slots[i]);
            pr->slots[i] = pr->foreign[i];
        }
        /* The odd slots registered once more, after the removals (a parent traced again). */
        for (long i = 1; i < pr->n; i += 2) {
            if (!RB_SPECIAL_CONST_P(pr->slots[i])) rb_gc_mark_weak(&pr->slots[i]);
        }
        pr->dups = 0;
        pr->done = 1;
    }
}

static void
probe_free(void *p)
{
    struct probe *pr = p;
    xfree(pr->slots);
    xfree(pr->foreign);
    xfree(pr);
}

static const rb_data_type_t probe_type = {
    "MosaicWeakProbe", { probe_mark, probe_free, 0, }, 0, 0, 0
};

static VALUE
probe_new(VALUE klass, VALUE n)
{
    struct probe *pr = ALLOC(struct probe);
    pr->n = NUM2LONG(n);
    pr->slots = ALLOC_N(VALUE, pr->n + 1);
    pr->foreign = ALLOC_N(VALUE, pr->n);
    for (long i = 0; i < pr->n; i++) pr->slots[i] = pr->foreign[i] = Qnil;
    pr->dups = pr->done = 0;
    VALUE obj = TypedData_Wrap_Struct(klass, &probe_type, pr);
    pr->slots[pr->n] = obj;  /* not a slot: the owner, read by probe_mark */
    return obj;
}

static struct probe *
get(VALUE self)
{
    return rb_check_typeddata(self, &probe_type);
}

static VALUE probe_set(VALUE self, VALUE i, VALUE obj) { get(self)->slots[NUM2LONG(i)] = obj; return obj; }
static VALUE probe_foreign(VALUE self, VALUE i, VALUE obj) { get(self)->foreign[NUM2LONG(i)] = obj; return Qnil; }
static VALUE probe_arm(VALUE self, VALUE dups) { get(self)->dups = NUM2INT(dups); return Qnil; }
static VALUE probe_raw(VALUE self, VALUE i) { return ULL2NUM((unsigned long long)get(self)->slots[NUM2LONG(i)]); }
static VALUE probe_foreign_raw(VALUE self, VALUE i) { return ULL2NUM((unsigned long long)get(self)->foreign[NUM2LONG(i)]); }
static VALUE probe_undef_p(VALUE self, VALUE i) { return get(self)->slots[NUM2LONG(i)] == Qundef ? Qtrue : Qfalse; }

void
Init_mosaic_weak_probe(void)
{
    void *lib = NULL;
    dl_iterate_phdr(find_gc_library, &lib);
    if (!lib) rb_raise(rb_eLoadError, "no modular GC library (librubygc.*.so) is loaded");
    impl_mark_weak = (void (*)(void *, VALUE *))dlsym(lib, "rb_gc_impl_mark_weak");
    impl_remove_weak = (void (*)(void *, VALUE, VALUE *))dlsym(lib, "rb_gc_impl_remove_weak");
    if (!impl_mark_weak || !impl_remove_weak) rb_raise(rb_eLoadError, "the GC library lacks rb_gc_impl_mark_weak/remove_weak");
    VALUE c = rb_define_class("MosaicWeakProbe", rb_cObject);
    rb_undef_alloc_func(c);
    rb_define_singleton_method(c, "new", probe_new, 1);
    rb_define_method(c, "set", probe_set, 2);
    rb_define_method(c, "foreign", probe_foreign, 2);
    rb_define_method(c, "arm", probe_arm, 1);
    rb_define_method(c, "raw", probe_raw, 1);
    rb_define_method(c, "foreign_raw", probe_foreign_raw, 1);
    rb_define_method(c, "undef?", probe_undef_p, 1);
}
