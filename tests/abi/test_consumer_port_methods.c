/* The ConsumerPort's method table (abi/consumer_port_methods.h) against
 * the service that proto/ipc/consumer_port.proto declares: the same
 * methods, each row's request and reply its method's, ids 1..N in row
 * order; and the lookups the service, the relay and the consumer use. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "abi/consumer_port_methods.h"
#include "pb/ipc/consumer_port.pb-c.h"

/* Each row's request and reply descriptors, named from its snake column:
 * a row whose column is wrong does not compile. */
static const struct {
  const char *name;
  const ProtobufCMessageDescriptor *request, *reply;
} kTypes[] = {
#define TYPES(id, Name, snake, role, traffic, refusal)            \
  [(id) - 1] = {#Name, &perfetto__protos__##snake##_request__descriptor, \
                &perfetto__protos__##snake##_response__descriptor},
    TG_CPORT_METHODS(TYPES)
#undef TYPES
};

static const ProtobufCServiceDescriptor *service(void) {
  return &perfetto__protos__consumer_port__descriptor;
}

static void table_has_every_method_of_the_proto_and_no_other(void **state) {
  (void)state;
  const ProtobufCServiceDescriptor *sd = service();
  assert_int_equal(sd->n_methods, TG_CPORT_N_METHODS);
  for (unsigned i = 0; i < sd->n_methods; i++) {
    const ProtobufCMethodDescriptor *md = &sd->methods[i];
    const tg_cport_method_t *m = tg_cport_method_by_name(md->name);
    assert_non_null(m);
    assert_string_equal(kTypes[m->id - 1].name, md->name);
    assert_ptr_equal(kTypes[m->id - 1].request, md->input);
    assert_ptr_equal(kTypes[m->id - 1].reply, md->output);
  }
}

static void table_ids_are_row_places(void **state) {
  (void)state;
  for (uint32_t id = 1; id <= TG_CPORT_N_METHODS; id++) {
    const tg_cport_method_t *m = tg_cport_method(id);
    assert_non_null(m);
    assert_int_equal(m->id, id);
    assert_ptr_equal(tg_cport_method_by_name(m->name), m);
    assert_string_equal(tg_cport_name(m->id), m->name);
  }
  assert_null(tg_cport_method(0));
  assert_null(tg_cport_method(TG_CPORT_N_METHODS + 1));
  assert_null(tg_cport_method_by_name("BindService"));
  assert_null(tg_cport_method_by_name("enabletracing"));
  assert_null(tg_cport_method_by_name(NULL));
}

/* Each refusal shape is built for one reply type (relay/filter_frames.c). */
static void refusal_shapes_match_their_reply_types(void **state) {
  (void)state;
  for (uint32_t id = 1; id <= TG_CPORT_N_METHODS; id++) {
    const tg_cport_method_t *m = tg_cport_method(id);
    const ProtobufCMessageDescriptor *reply = kTypes[id - 1].reply;
    switch (m->refusal) {
    case TG_CPORT_REFUSE_DISABLED:
      assert_ptr_equal(reply,
                       &perfetto__protos__enable_tracing_response__descriptor);
      break;
    case TG_CPORT_REFUSE_ERROR:
      assert_ptr_equal(reply,
                       &perfetto__protos__clone_session_response__descriptor);
      break;
    case TG_CPORT_REFUSE_MSG:
      assert_ptr_equal(
          reply, &perfetto__protos__save_trace_for_bugreport_response__descriptor);
      break;
    case TG_CPORT_REFUSE_NOTE:
      break;
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(table_has_every_method_of_the_proto_and_no_other),
      cmocka_unit_test(table_ids_are_row_places),
      cmocka_unit_test(refusal_shapes_match_their_reply_types),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
