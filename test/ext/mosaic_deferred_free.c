/*
 * test/ext/mosaic_deferred_free.c: a test extension (built by test_malloc.rb) whose objects
 * hold a malloc'd buffer and free it in a dfree that does not run inside the GC: its data type
 * lacks RUBY_TYPED_FREE_IMMEDIATELY, as many C extensions' types do, so a dead one becomes a
 * zombie and its dfree runs later, from the finalizer job (finalize.c).
 *
 * MosaicDeferredFree.new(bytes): an object holding `bytes` bytes from ruby_xmalloc, every page
 * of it written.
 */
#include <string.h>

#include "ruby/ruby.h"

struct buffer {
    size_t size;
    char *bytes;
};

static void
buffer_free(void *ptr)
{
    struct buffer *b = ptr;
    ruby_xfree(b->bytes);
    ruby_xfree(b);
}

static size_t
buffer_memsize(const void *ptr)
{
    const struct buffer *b = ptr;
    return sizeof(*b) + b->size;
}

static const rb_data_type_t buffer_type = {
    .wrap_struct_name = "mosaic_deferred_free",
    .function = { .dmark = NULL, .dfree = buffer_free, .dsize = buffer_memsize },
    .flags = 0, /* no RUBY_TYPED_FREE_IMMEDIATELY: freed later, as a zombie */
};

static VALUE
buffer_alloc(VALUE klass)
{
    struct buffer *b;
    VALUE obj = TypedData_Make_Struct(klass, struct buffer, &buffer_type, b);
    return obj;
}

static VALUE
buffer_initialize(VALUE self, VALUE size)
{
    struct buffer *b;
    TypedData_Get_Struct(self, struct buffer, &buffer_type, b);
    size_t n = NUM2SIZET(size);
    b->bytes = ruby_xmalloc(n);
    memset(b->bytes, 1, n);
    b->size = n;
    return self;
}

void
Init_mosaic_deferred_free(void)
{
    VALUE c = rb_define_class("MosaicDeferredFree", rb_cObject);
    rb_define_alloc_func(c, buffer_alloc);
    rb_define_method(c, "initialize", buffer_initialize, 1);
}
