// TEST DOUBLE: the soft NIC's own entry points, for tests. Everything else it offers is the
// libibverbs ABI (<infiniband/verbs.h>): libloom_softnic.so exports the ibv_* functions under
// libibverbs' symbol versions, so a dlopen/dlsym verbs table loads it like libibverbs.so.1.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

// The soft NIC's function for an ibv_* name (the names libibverbs exports, plus
// "ibv_post_send", "ibv_post_recv", "ibv_poll_cq" and "ibv_req_notify_cq", which verbs.h
// reaches through context->ops), or one of the loom_softnic_* names below; NULL otherwise.
// "ibv_query_port" is the exported compat entry (struct _compat_ibv_port_attr), as dlsym on
// libibverbs.so.1 gives it.
void* loom_softnic_lookup(const char* name);

// Applies a fault spec ("retry_exceeded@N", "qp_fatal@N", "reg_fail@N", "no_dmabuf",
// "port_down", "clear", comma-separated; see faults.cc). 0, or EINVAL for a bad spec.
int loom_softnic_inject(const char* spec);

// Takes a port of the named device up or down, raising IBV_EVENT_PORT_ACTIVE/IBV_EVENT_PORT_ERR
// on its open contexts. 0, EINVAL (port) or ENODEV (name).
int loom_softnic_set_port_state(const char* device, int port, int active);

#ifdef __cplusplus
}
#endif
