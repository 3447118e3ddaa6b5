// The e-stop's tripwire: a thread that waits in the kernel on an input
// line and, when the line reaches its stop level, drives every covered
// output to its safe level and reads each back before anything else runs.
// It runs no Go code, so the Go scheduler cannot delay it. See tripwire.c.

#ifndef TOBE_TRIPWIRE_H
#define TOBE_TRIPWIRE_H

#include <pthread.h>
#include <stdint.h>

#define TB_MAX_OUTS 64

// Errors of tb_req_set besides errno values.
#define TB_EHALTED (-1)
#define TB_ECLOSED (-2)

// An output request: the lines of one chip the body drives, held in one
// request of the kernel's (up to 64), so that one GPIO_V2_LINE_SET_VALUES
// drives any of them and one GET_VALUES reads them back. Bit i of each
// mask is the request's line i. Go's writes and the tripwire's halts
// exclude each other with mu (which inherits priority: a writer holding
// it runs at the tripwire's priority until it lets go). It is freed when
// its last reference is released.
typedef struct {
	pthread_mutex_t mu;
	int fd;          // -1 once closed
	uint64_t lines;  // every line of the request
	uint64_t safe;   // each line's safe level
	uint64_t halted; // the lines latched by a halt
	int refs;
} tb_req;

tb_req *tb_req_new(int fd, int nlines, uint64_t safe);
// tb_req_set drives line i to v: 0, TB_EHALTED, TB_ECLOSED or an errno.
int tb_req_set(tb_req *q, int i, int v);
// tb_req_halt drives the lines of mask to their safe levels and latches
// them, in one call: 0 or an errno (EBADF once closed).
int tb_req_halt(tb_req *q, uint64_t mask);
// tb_req_get reads the lines of mask back, in one call, into *bits.
int tb_req_get(tb_req *q, uint64_t mask, uint64_t *bits);
int tb_req_rearm(tb_req *q, int i);
void tb_req_close(tb_req *q);
void tb_req_release(tb_req *q);

// Flags of a record.
#define TB_REC_HIGH       0x1 // the level after the edge is high
#define TB_REC_RECONCILED 0x2 // found by the periodic read, no event told of it
#define TB_REC_HALTED     0x4 // a stop: the outputs were halted and read back
#define TB_REC_END        0x8 // the thread ended on an error (err)
#define TB_REC_LOST       0x10 // records before this one were lost (the reader fell behind)
#define TB_REC_LOST_STOP  0x20 // and one of them was a stop

// One record, written whole into the pipe (it is smaller than PIPE_BUF).
typedef struct {
	uint64_t edge_ns; // the kernel's timestamp, or when the level was read
	uint64_t safe_ns; // when the last output was read back (halted)
	uint64_t seq;     // the kernel's sequence number of the line's events
	uint32_t flags;
	int32_t err;      // errno (TB_REC_END)
	uint32_t nouts;
	int8_t readback[TB_MAX_OUTS]; // 0 low, 1 high
	int32_t errs[TB_MAX_OUTS];    // errno of the halt or the read-back; 0 ok
} tb_rec;

typedef struct tb_trip tb_trip;

// tb_trip_start starts the thread. in_fd is the line's request, level its
// level now, stop the level that means stop, reconcile_ms the period of
// the read when no event arrives (0: none), rec_fd the pipe the records
// go to. Output i is line lines[i] of reqs[i]; a stop halts the outputs
// of each request with one call and reads them back with one more. It
// takes a reference on each request. NULL with *err set on failure.
tb_trip *tb_trip_start(int in_fd, int level, int stop, int reconcile_ms, int rec_fd, tb_req **reqs, const int *lines, int nouts, int *err);
// tb_trip_sched says how the thread runs: its policy and priority.
void tb_trip_sched(tb_trip *t, int *policy, int *prio, int *err);
// tb_trip_stop ends the thread, waits for it and frees it.
void tb_trip_stop(tb_trip *t);

#endif
