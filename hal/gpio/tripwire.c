//go:build linux && cgo

// The tripwire's thread. It polls the line's request and a wake-up
// eventfd; on an edge to the stop level, or on a periodic read that finds
// the line at stop with no event to explain it, it halts every covered
// output (drive safe and latch, under its request's own lock, one call
// per request), reads them back (one call per request), and only then
// writes a record of it to a pipe that Go reads. While the line is at a
// level an event told of, and not at stop, any event means it left that
// level (to stop, or through stop and back), so the outputs are halted
// the moment the event is signalled, before it is read: a stop costs the
// two calls a chip and nothing more. A read error of the line
// is a stop too. It blocks every signal, so nothing of Go's runs on it,
// and asks for SCHED_FIFO when it may.

#include "tripwire.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <linux/gpio.h>

#define TB_FIFO_PRIO 50

struct tb_trip {
	pthread_t thread;
	int in_fd, wake_fd, rec_fd;
	int level, stop, reconcile_ms;
	int known; // level is an event's of the kernel's, not a read's (see run)
	uint64_t seq;
	int nouts, nreqs;
	tb_req *reqs[TB_MAX_OUTS];  // each request once
	uint64_t masks[TB_MAX_OUTS]; // the covered lines of each
	int out_req[TB_MAX_OUTS];    // output i is line out_line[i] of reqs[out_req[i]]
	int out_line[TB_MAX_OUTS];
	int policy, prio, sched_err;
	tb_rec pending; // a record the pipe had no room for
	int has_pending;
};

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int set_values(int fd, uint64_t mask, uint64_t bits) {
	struct gpio_v2_line_values lv;
	memset(&lv, 0, sizeof lv);
	lv.bits = bits & mask;
	lv.mask = mask;
	return ioctl(fd, GPIO_V2_LINE_SET_VALUES_IOCTL, &lv) < 0 ? errno : 0;
}

static int get_values(int fd, uint64_t mask, uint64_t *bits) {
	struct gpio_v2_line_values lv;
	memset(&lv, 0, sizeof lv);
	lv.mask = mask;
	if (ioctl(fd, GPIO_V2_LINE_GET_VALUES_IOCTL, &lv) < 0)
		return errno;
	*bits = lv.bits & mask;
	return 0;
}

tb_req *tb_req_new(int fd, int nlines, uint64_t safe) {
	if (nlines < 1 || nlines > TB_MAX_OUTS)
		return NULL;
	tb_req *q = calloc(1, sizeof *q);
	if (q == NULL)
		return NULL;
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT);
	int r = pthread_mutex_init(&q->mu, &a);
	pthread_mutexattr_destroy(&a);
	if (r != 0) {
		free(q);
		return NULL;
	}
	q->fd = fd;
	q->lines = nlines == 64 ? ~0ull : (1ull << nlines) - 1;
	q->safe = safe & q->lines;
	q->refs = 1;
	return q;
}

int tb_req_set(tb_req *q, int i, int v) {
	uint64_t bit = 1ull << i;
	int r;
	pthread_mutex_lock(&q->mu);
	if (q->fd < 0)
		r = TB_ECLOSED;
	else if (q->halted & bit)
		r = TB_EHALTED;
	else
		r = set_values(q->fd, bit, v ? bit : 0);
	pthread_mutex_unlock(&q->mu);
	return r;
}

int tb_req_halt(tb_req *q, uint64_t mask) {
	int r = EBADF;
	mask &= q->lines;
	pthread_mutex_lock(&q->mu);
	q->halted |= mask;
	if (q->fd >= 0)
		r = set_values(q->fd, mask, q->safe);
	pthread_mutex_unlock(&q->mu);
	return r;
}

int tb_req_get(tb_req *q, uint64_t mask, uint64_t *bits) {
	int r = EBADF;
	mask &= q->lines;
	pthread_mutex_lock(&q->mu);
	if (q->fd >= 0)
		r = get_values(q->fd, mask, bits);
	pthread_mutex_unlock(&q->mu);
	return r;
}

int tb_req_rearm(tb_req *q, int i) {
	int r = 0;
	pthread_mutex_lock(&q->mu);
	if (q->fd < 0)
		r = TB_ECLOSED;
	else
		q->halted &= ~(1ull << i);
	pthread_mutex_unlock(&q->mu);
	return r;
}

void tb_req_close(tb_req *q) {
	pthread_mutex_lock(&q->mu);
	q->halted = q->lines;
	if (q->fd >= 0)
		set_values(q->fd, q->lines, q->safe);
	q->fd = -1; // Go closes the descriptor after this
	pthread_mutex_unlock(&q->mu);
}

void tb_req_release(tb_req *q) {
	if (__atomic_sub_fetch(&q->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		pthread_mutex_destroy(&q->mu);
		free(q);
	}
}

// halt drives every output safe first, a call per request, then reads
// them back, a call per request: the outputs are safe as early as they
// can be.
static void halt(tb_trip *t, tb_rec *r) {
	int errs[TB_MAX_OUTS];
	uint64_t bits[TB_MAX_OUTS];
	r->flags |= TB_REC_HALTED;
	r->nouts = (uint32_t)t->nouts;
	for (int k = 0; k < t->nreqs; k++)
		errs[k] = tb_req_halt(t->reqs[k], t->masks[k]);
	for (int k = 0; k < t->nreqs; k++) {
		bits[k] = 0;
		if (errs[k] == 0)
			errs[k] = tb_req_get(t->reqs[k], t->masks[k], &bits[k]);
	}
	for (int i = 0; i < t->nouts; i++) {
		int k = t->out_req[i];
		r->errs[i] = errs[k];
		r->readback[i] = (int8_t)((bits[k] >> t->out_line[i]) & 1);
	}
	r->safe_ns = now_ns();
}

// emit writes a record, or keeps it for when the pipe has room: the last
// record is never lost, the ones it replaced are flagged.
static void emit(tb_trip *t, tb_rec *r) {
	if (t->has_pending) {
		if (write(t->rec_fd, &t->pending, sizeof t->pending) == (ssize_t)sizeof t->pending) {
			t->has_pending = 0;
		} else {
			uint32_t lost = TB_REC_LOST | (t->pending.flags & TB_REC_LOST_STOP);
			if (t->pending.flags & TB_REC_HALTED)
				lost |= TB_REC_LOST_STOP;
			r->flags |= lost;
			t->pending = *r;
			return;
		}
	}
	if (write(t->rec_fd, r, sizeof *r) != (ssize_t)sizeof *r) {
		t->pending = *r;
		t->has_pending = 1;
	}
}

// flush waits until a pending record is written or the thread is asked
// to stop (for the last record, which must arrive).
static void flush(tb_trip *t) {
	while (t->has_pending) {
		struct pollfd p[2] = {{.fd = t->rec_fd, .events = POLLOUT}, {.fd = t->wake_fd, .events = POLLIN}};
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			return;
		if (p[1].revents)
			return;
		if (write(t->rec_fd, &t->pending, sizeof t->pending) == (ssize_t)sizeof t->pending)
			t->has_pending = 0;
	}
}

static void edge(tb_trip *t, uint64_t at, int level, uint32_t flags) {
	tb_rec r;
	memset(&r, 0, sizeof r);
	t->level = level;
	t->known = !(flags & TB_REC_RECONCILED);
	r.edge_ns = at;
	r.seq = t->seq;
	r.flags = flags | (level ? TB_REC_HIGH : 0);
	if (level == t->stop)
		halt(t, &r);
	emit(t, &r);
}

// fail halts the outputs (a line that cannot be read cannot say go) and
// ends the thread with a record of the error.
static void fail(tb_trip *t, int err) {
	tb_rec r;
	memset(&r, 0, sizeof r);
	r.edge_ns = now_ns();
	r.seq = t->seq;
	r.err = err;
	r.flags = TB_REC_END;
	halt(t, &r);
	emit(t, &r);
	flush(t);
}

static void lost_stop(tb_trip *t, tb_rec *h, uint64_t at);

// events reads what the kernel queued for the line: 0, or an errno. pre
// is a halt made before the read (see run), or NULL: the first edge to
// stop carries it. An edge from a level that is not stop (an event's) to
// one that is not stop either means the line was at stop between them,
// and the kernel's queue lost that edge or the line was back before the
// kernel read it: that is a stop, halted (by pre, or here) and reported
// before the edge as one found by a read (reconciled). So is a read that
// finds nothing after pre (the thread is the line's only reader, so it
// does not happen), for the outputs are latched.
static int events(tb_trip *t, tb_rec *pre) {
	struct gpio_v2_line_event ev[16];
	ssize_t n = read(t->in_fd, ev, sizeof ev);
	int err = 0;
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			err = errno;
		n = 0;
	}
	for (ssize_t i = 0; i < n / (ssize_t)sizeof ev[0]; i++) {
		int level = ev[i].id == GPIO_V2_LINE_EVENT_RISING_EDGE;
		uint64_t at = ev[i].timestamp_ns;
		if (pre != NULL && level == t->stop) {
			t->seq = ev[i].line_seqno;
			t->level = level;
			t->known = 1;
			pre->edge_ns = at;
			pre->seq = t->seq;
			pre->flags |= level ? TB_REC_HIGH : 0;
			emit(t, pre);
			pre = NULL;
			continue;
		}
		if (pre != NULL) {
			lost_stop(t, pre, at);
			pre = NULL;
		} else if (t->known && t->level != t->stop && level != t->stop) {
			tb_rec r;
			memset(&r, 0, sizeof r);
			halt(t, &r);
			lost_stop(t, &r, at);
		}
		t->seq = ev[i].line_seqno;
		edge(t, at, level, 0);
	}
	if (pre != NULL && err == 0)
		lost_stop(t, pre, pre->safe_ns);
	return err;
}

// lost_stop reports the halt h, made for a stop no event was read of, as
// a stop found by a read (reconciled) no later than at, after the last
// event read.
static void lost_stop(tb_trip *t, tb_rec *h, uint64_t at) {
	t->level = t->stop;
	t->known = 0;
	h->edge_ns = at;
	h->seq = t->seq;
	h->flags |= TB_REC_RECONCILED | (t->stop ? TB_REC_HIGH : 0);
	emit(t, h);
}

// reconcile reads the line when no event came for a while; at a level
// other than the last edge's, an event queued meanwhile explains it, and
// without one the level is an edge of its own.
static int reconcile(tb_trip *t) {
	uint64_t bits;
	int err = get_values(t->in_fd, 1, &bits);
	if (err != 0)
		return err;
	int v = (int)bits;
	if (v == t->level)
		return 0;
	struct pollfd p = {.fd = t->in_fd, .events = POLLIN};
	if (poll(&p, 1, 0) > 0 && (p.revents & POLLIN))
		return events(t, NULL);
	edge(t, now_ns(), v, TB_REC_RECONCILED);
	return 0;
}

static void *run(void *arg) {
	tb_trip *t = arg;
	for (;;) {
		struct pollfd p[3] = {
			{.fd = t->in_fd, .events = POLLIN},
			{.fd = t->wake_fd, .events = POLLIN},
			{.fd = t->has_pending ? t->rec_fd : -1, .events = POLLOUT},
		};
		int n = poll(p, 3, t->reconcile_ms > 0 ? t->reconcile_ms : -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			fail(t, errno);
			return NULL;
		}
		if (p[1].revents)
			return NULL;
		int err = 0;
		if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL))
			err = (p[0].revents & POLLNVAL) ? EBADF : EIO;
		else if ((p[0].revents & POLLIN) && t->known && t->level != t->stop) {
			// An event after an event's level that is not stop: the line
			// left that level, to stop or through it and back (see
			// events), so the outputs are halted before the event is
			// read, one call sooner. After a level found by a read (at
			// arming, or a reconcile) the event may be that same change,
			// told late: it is read first.
			tb_rec r;
			memset(&r, 0, sizeof r);
			halt(t, &r);
			err = events(t, &r);
		} else if (p[0].revents & POLLIN)
			err = events(t, NULL);
		else if (n == 0)
			err = reconcile(t);
		if (err != 0) {
			fail(t, err);
			return NULL;
		}
		if (t->has_pending && (p[2].revents & POLLOUT)) {
			if (write(t->rec_fd, &t->pending, sizeof t->pending) == (ssize_t)sizeof t->pending)
				t->has_pending = 0;
		}
	}
}

tb_trip *tb_trip_start(int in_fd, int level, int stop, int reconcile_ms, int rec_fd, tb_req **reqs, const int *lines, int nouts, int *err) {
	if (nouts < 0 || nouts > TB_MAX_OUTS) {
		*err = EINVAL;
		return NULL;
	}
	for (int i = 0; i < nouts; i++) {
		if (lines[i] < 0 || lines[i] >= TB_MAX_OUTS || !(reqs[i]->lines & (1ull << lines[i]))) {
			*err = EINVAL;
			return NULL;
		}
	}
	tb_trip *t = calloc(1, sizeof *t);
	if (t == NULL) {
		*err = ENOMEM;
		return NULL;
	}
	t->in_fd = in_fd;
	t->rec_fd = rec_fd;
	t->level = level;
	t->stop = stop;
	t->reconcile_ms = reconcile_ms;
	t->nouts = nouts;
	for (int i = 0; i < nouts; i++) {
		int k = 0;
		while (k < t->nreqs && t->reqs[k] != reqs[i])
			k++;
		if (k == t->nreqs) {
			__atomic_add_fetch(&reqs[i]->refs, 1, __ATOMIC_ACQ_REL);
			t->reqs[t->nreqs++] = reqs[i];
		}
		t->masks[k] |= 1ull << lines[i];
		t->out_req[i] = k;
		t->out_line[i] = lines[i];
	}
	t->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t->wake_fd < 0) {
		*err = errno;
		goto fail;
	}
	// No signal is delivered to the thread: it inherits a full mask.
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&a, SCHED_FIFO);
	struct sched_param sp = {.sched_priority = TB_FIFO_PRIO};
	pthread_attr_setschedparam(&a, &sp);
	int r = pthread_create(&t->thread, &a, run, t);
	pthread_attr_destroy(&a);
	if (r == EPERM) {
		t->sched_err = r; // no permission for real-time: run as any other thread
		r = pthread_create(&t->thread, NULL, run, t);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0) {
		*err = r;
		close(t->wake_fd);
		goto fail;
	}
	pthread_getschedparam(t->thread, &t->policy, &sp);
	t->prio = sp.sched_priority;
	return t;
fail:
	for (int k = 0; k < t->nreqs; k++)
		tb_req_release(t->reqs[k]);
	free(t);
	return NULL;
}

void tb_trip_sched(tb_trip *t, int *policy, int *prio, int *err) {
	*policy = t->policy == SCHED_FIFO ? 1 : 0;
	*prio = t->prio;
	*err = t->sched_err;
}

void tb_trip_stop(tb_trip *t) {
	uint64_t one = 1;
	while (write(t->wake_fd, &one, sizeof one) < 0 && errno == EINTR)
		;
	pthread_join(t->thread, NULL);
	close(t->wake_fd);
	for (int k = 0; k < t->nreqs; k++)
		tb_req_release(t->reqs[k]);
	free(t);
}
