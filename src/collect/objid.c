/*
 * objid.c: object ids.
 *
 * Owns: the two tables obj -> id and id -> obj, and the id counter.
 *
 * Invariants:
 *  - An object has an id iff FL_SEEN_OBJ_ID is set iff it is in both tables.
 *  - Ids are never reused: they come from a counter that only grows.
 *  - The tables' object side is weak: a freed object's entries are removed by the sweep
 *    (or by finalize_list for zombies); the ids themselves (which may be Bignums) are marked,
 *    and pinned: a Bignum id is a key of id_to_obj, and compaction only re-keys the object side.
 *  - Both tables follow an object that compaction moves (mosaic_objid_move, compact.c), at
 *    the moment it moves: no entry ever names a T_MOVED slot.
 *  - Outside the GC the tables are updated with collections held off (mosaic_gc_hold): a
 *    collection inside st_insert's malloc would edit the same table (sweep, compaction).
 */
#include "core/mosaic.h"

#define OBJ_ID_INCREMENT (RUBY_IMMEDIATE_MASK + 1)
#define OBJ_ID_INITIAL   (OBJ_ID_INCREMENT)

static int
object_id_cmp(st_data_t x, st_data_t y)
{
    if (RB_TYPE_P((VALUE)x, T_BIGNUM)) return !rb_big_eql((VALUE)x, (VALUE)y);
    return x != y;
}

static st_index_t
object_id_hash(st_data_t n)
{
    return FIX2LONG(rb_hash((VALUE)n));
}

static const struct st_hash_type object_id_hash_type = {
    object_id_cmp,
    object_id_hash,
};

void
mosaic_objid_init(mosaic_objspace_t *objspace)
{
    objspace->objid.id_to_obj = st_init_table(&object_id_hash_type);
    objspace->objid.obj_to_id = st_init_numtable();
    objspace->objid.next_id = OBJ_ID_INITIAL;
}

static int
mark_id_i(st_data_t key, st_data_t value, st_data_t data)
{
    mosaic_mark((mosaic_objspace_t *)data, (VALUE)value, true);
    return ST_CONTINUE;
}

/* The ids are the only thing in the tables to mark, and only a Bignum id is an object: while
 * every id handed out is a Fixnum (the counter has not passed FIXNUM_MAX, which takes 2^60
 * ids), there is nothing to mark and the table is not walked at all. */
void
mosaic_objid_mark_roots(mosaic_objspace_t *objspace)
{
    if (objspace->objid.next_id <= (unsigned long long)RUBY_FIXNUM_MAX) return;
    st_foreach(objspace->objid.obj_to_id, mark_id_i, (st_data_t)objspace);
}

/* Forgets a dying object's id. Caller holds the VM lock or is inside the GC. */
void
mosaic_objid_free(mosaic_objspace_t *objspace, VALUE obj)
{
    st_data_t o = (st_data_t)obj, id;
    RB_FL_UNSET_RAW(obj, RUBY_FL_SEEN_OBJ_ID);
    if (st_delete(objspace->objid.obj_to_id, &o, &id)) {
        st_delete(objspace->objid.id_to_obj, &id, NULL);
    }
    else {
        rb_bug("Mosaic: object %p has FL_SEEN_OBJ_ID but no id", (void *)obj);
    }
}

/* Compaction moved `src` (which has FL_SEEN_OBJ_ID) to `dest`: its id now names `dest`.
 * Inside the GC; st_insert may malloc (never a Ruby object). */
void
mosaic_objid_move(mosaic_objspace_t *objspace, VALUE src, VALUE dest)
{
    st_data_t o = (st_data_t)src, id;
    if (!st_delete(objspace->objid.obj_to_id, &o, &id)) {
        rb_bug("Mosaic: moving %p, which has FL_SEEN_OBJ_ID but no id", (void *)src);
    }
    st_insert(objspace->objid.obj_to_id, (st_data_t)dest, id);
    st_insert(objspace->objid.id_to_obj, id, (st_data_t)dest);
}

VALUE
mosaic_object_id(mosaic_objspace_t *objspace, VALUE obj)
{
    VALUE id;
    unsigned int lev = rb_gc_vm_lock();
    if (RB_FL_TEST_RAW(obj, RUBY_FL_SEEN_OBJ_ID)) {
        st_data_t val;
        if (!st_lookup(objspace->objid.obj_to_id, (st_data_t)obj, &val)) {
            rb_bug("Mosaic: object %p has FL_SEEN_OBJ_ID but no id", (void *)obj);
        }
        id = (VALUE)val;
    }
    else {
        id = ULL2NUM(objspace->objid.next_id);
        objspace->objid.next_id += OBJ_ID_INCREMENT;
        bool held = mosaic_gc_hold(objspace);
        st_insert(objspace->objid.obj_to_id, (st_data_t)obj, (st_data_t)id);
        st_insert(objspace->objid.id_to_obj, (st_data_t)id, (st_data_t)obj);
        RB_FL_SET_RAW(obj, RUBY_FL_SEEN_OBJ_ID);
        mosaic_gc_release(objspace, held);
    }
    rb_gc_vm_unlock(lev);
    return id;
}

/* The id a finalizer receives: the object's id if it had one, else a fresh one. */
VALUE
mosaic_objid_for_finalizer(mosaic_objspace_t *objspace, VALUE obj)
{
    if (RB_FL_TEST_RAW(obj, RUBY_FL_SEEN_OBJ_ID)) return mosaic_object_id(objspace, obj);
    VALUE id = ULL2NUM(objspace->objid.next_id);
    objspace->objid.next_id += OBJ_ID_INCREMENT;
    return id;
}

VALUE
mosaic_object_id_to_ref(mosaic_objspace_t *objspace, VALUE object_id)
{
    st_data_t obj;
    if (st_lookup(objspace->objid.id_to_obj, object_id, &obj) &&
            !rb_gc_impl_garbage_object_p(objspace, (VALUE)obj)) {
        return (VALUE)obj;
    }

    if (rb_funcall(object_id, rb_intern(">="), 1, ULL2NUM(objspace->objid.next_id))) {
        rb_raise(rb_eRangeError, "%+"PRIsVALUE" is not id value", rb_funcall(object_id, rb_intern("to_s"), 1, INT2FIX(10)));
    }
    rb_raise(rb_eRangeError, "%+"PRIsVALUE" is recycled object", rb_funcall(object_id, rb_intern("to_s"), 1, INT2FIX(10)));
}
