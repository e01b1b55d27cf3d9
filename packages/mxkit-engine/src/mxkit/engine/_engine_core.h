// C++ state of mxkit's threaded engine: vars, operations, worker-pool queues, waiters.
//
// Every structure here is touched without the Python GIL's help: each has its own
// std::mutex, held only for a few C++ statements and never while calling into Python,
// so a thread that holds the GIL can always take one without risk of deadlock.
// Python objects (the callable, the name, the Var objects) are only stored here as
// borrowed/owned PyObject* pointers; reference counts are managed by the Cython side
// with the GIL held.
#pragma once

#include <Python.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <queue>
#include <thread>
#include <utility>
#include <vector>

#include <time.h>

struct MxOpr;

// A one-shot event shared by a waiting thread and an operation; freed by whichever of
// the two lets go last (the waiter may give up on Ctrl-C before the operation runs).
struct MxWaiter {
  std::mutex m;
  std::condition_variable cv;
  std::atomic<bool> done{false};
  std::atomic<int> refs{2};

  void signal() {
    {
      std::lock_guard<std::mutex> guard(m);
      done.store(true, std::memory_order_release);
    }
    cv.notify_all();
  }
  // Spins for a few microseconds first: a short operation usually finishes within
  // them, and the waiter then skips a sleep/wake-up pair of futex calls.
  bool spin(int rounds) {
    for (int i = 0; i < rounds; ++i) {
      if (done.load(std::memory_order_acquire)) return true;
      std::this_thread::yield();
    }
    return done.load(std::memory_order_acquire);
  }
  // true once signalled; false after `ms` milliseconds without it
  bool wait_ms(int ms) {
    std::unique_lock<std::mutex> lock(m);
    return cv.wait_for(lock, std::chrono::milliseconds(ms),
                       [this] { return done.load(std::memory_order_acquire); });
  }
  void release() {
    if (refs.fetch_sub(1) == 1) delete this;
  }
};

enum MxOprKind { MX_OPR_SYNC = 0, MX_OPR_ASYNC = 1, MX_OPR_WAIT = 2, MX_OPR_DELETE = 3 };

// What the profiler keeps of an operation between its push and its completion; made only
// for an operation pushed while the profiler records.
struct MxOprProfile {
  long long t_push = 0;          // ns on CLOCK_MONOTONIC (Python's time.monotonic_ns)
  long long t_start = 0;
  unsigned long tid = 0;         // the worker thread that started it
  PyObject* scope = nullptr;     // owned reference: the profiler scope at push, or nullptr
};

struct MxOpr {
  std::atomic<int> wait{0};      // vars not yet granted + 1 while the push registers it
  // Pushed while the profiler recorded (it sits in the padding after `wait`: an op stays
  // 104 bytes). Every later profiler test reads this, not the global flag, so an op is
  // recorded whole or not at all whatever happens to the profiler's state meanwhile.
  bool profiled = false;
  PyObject* fn = nullptr;        // owned reference (nullptr for a wait marker)
  PyObject* name = nullptr;      // owned reference
  std::vector<PyObject*> reads;  // owned references to Var objects
  std::vector<PyObject*> writes; // owned references to Var objects
  int priority = 0;
  // writes[0:n_rw] were also listed in reads (read-modify-write): the op inherits their
  // errors; the other writes are overwritten whole, so a success clears their errors.
  int n_rw = 0;                  // (sits in the padding after `priority`)
  long long seq = 0;             // push order: FIFO among equal priorities
  int pool = 0;
  int kind = MX_OPR_SYNC;
  union {                        // a wait marker is never profiled: they share a slot
    MxWaiter* waiter = nullptr;  // for MX_OPR_WAIT
    MxOprProfile* prof;          // owned, when `profiled`
  };
};

// One profiled operation, filled at its completion. Python objects are owned references
// handed back by mxkit.engine._profile.take_records (with the GIL, as they are filled:
// every push and completion holds the GIL, so the buffers need no lock of their own).
struct MxProfRecord {
  long long core = 0, seq = 0, t_push = 0, t_start = 0, t_end = 0;
  unsigned long tid = 0;
  PyObject* label = nullptr;   // the op's name, or its callable when `named` is false
  PyObject* scope = nullptr;   // the profiler scope at push, or nullptr
  PyObject* device = nullptr;  // the Context (naive engine), or nullptr: known from `pool`
  int kind = 0, pool = 0;
  bool named = true, failed = false;
  size_t vars_begin = 0;       // var ids in MxProfBuffer::var_ids: reads, then writes
  int n_reads = 0, n_writes = 0;
};

// The consumer waited for the producer's write of `var` and was granted it by the
// producer's completion (a flow arrow in the trace).
struct MxProfFlow {
  long long core, producer, consumer, var;
};

struct MxProfBuffer {
  std::vector<MxProfRecord> ops;
  std::vector<long long> var_ids;
  std::vector<MxProfFlow> flows;

  void add_flow(long long core, long long producer, long long consumer, long long var) {
    flows.push_back(MxProfFlow{core, producer, consumer, var});
  }
  // Moves everything recorded into `out` (empty) and leaves this buffer empty.
  void take(MxProfBuffer& out) {
    out.ops.swap(ops);
    out.var_ids.swap(var_ids);
    out.flows.swap(flows);
  }
};

// CLOCK_MONOTONIC in nanoseconds: the clock of time.monotonic_ns(), so that events
// recorded in Python (scopes, markers, memory counters) line up with the engine's.
inline long long mx_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// Dependency queue of one variable (MXNet's ThreadedVar). Invariant: when no write is
// running, the front of `queue` (if any) is a write waiting for running reads to end.
struct MxVarState {
  std::mutex m;
  std::deque<std::pair<MxOpr*, bool>> queue;  // (operation, is_write), not yet granted
  int running_reads = 0;
  bool write_running = false;
  long long version = 0;  // completed writes

  // Register `op` on this var; true if it may touch the var at once.
  bool append(MxOpr* op, bool is_write) {
    std::lock_guard<std::mutex> guard(m);
    if (is_write) {
      if (!write_running && running_reads == 0 && queue.empty()) {
        write_running = true;
        return true;
      }
    } else if (!write_running && queue.empty()) {
      ++running_reads;
      return true;
    }
    queue.emplace_back(op, is_write);
    return false;
  }

  // True if a read pushed now would be granted at once (nothing pending ahead of it).
  bool readable_now() {
    std::lock_guard<std::mutex> guard(m);
    return !write_running && queue.empty();
  }

  // A read finished; append to `ready` the write it was holding back, if any.
  void complete_read(std::vector<MxOpr*>& ready) {
    std::lock_guard<std::mutex> guard(m);
    if (--running_reads == 0 && !queue.empty()) {
      ready.push_back(queue.front().first);
      queue.pop_front();
      write_running = true;
    }
  }

  // A write finished; grant the next write, or every read up to the next write.
  void complete_write(std::vector<MxOpr*>& ready) {
    std::lock_guard<std::mutex> guard(m);
    write_running = false;
    ++version;
    if (queue.empty()) return;
    if (queue.front().second) {
      ready.push_back(queue.front().first);
      queue.pop_front();
      write_running = true;
      return;
    }
    while (!queue.empty() && !queue.front().second) {
      ready.push_back(queue.front().first);
      queue.pop_front();
      ++running_reads;
    }
  }

  // In a child process after os.fork(), for a var of the parent's engine: true if a
  // write was running or queued at the fork (a queued read always waits behind a write).
  // Unlocked: the child has none of the parent's threads, and a parent thread may have
  // held `m` at the fork; only two plain fields are read, so a torn update cannot hang.
  bool write_pending_at_fork() const {
    return write_running || !queue.empty();
  }

  size_t queued() {
    std::lock_guard<std::mutex> guard(m);
    return queue.size();
  }
};

struct MxOprOrder {
  // std::priority_queue puts the "largest" on top: higher priority, then earlier push.
  bool operator()(const MxOpr* a, const MxOpr* b) const {
    if (a->priority != b->priority) return a->priority < b->priority;
    return a->seq > b->seq;
  }
};

// The ready queue of one worker pool.
struct MxPool {
  std::mutex m;
  std::condition_variable cv;
  std::priority_queue<MxOpr*, std::vector<MxOpr*>, MxOprOrder> ready;
  bool stop = false;
  int idle = 0;

  void put(MxOpr* op, bool wake) {
    bool notify;
    {
      std::lock_guard<std::mutex> guard(m);
      ready.push(op);
      notify = wake && idle > 0;
    }
    if (notify) cv.notify_one();
  }
  MxOpr* try_take() {
    std::lock_guard<std::mutex> guard(m);
    if (ready.empty()) return nullptr;
    MxOpr* op = ready.top();
    ready.pop();
    return op;
  }
  // Blocks (call without the GIL) until an operation is ready, or returns nullptr once
  // the pool is stopped and empty.
  MxOpr* wait_take() {
    std::unique_lock<std::mutex> lock(m);
    ++idle;
    cv.wait(lock, [this] { return stop || !ready.empty(); });
    --idle;
    if (ready.empty()) return nullptr;
    MxOpr* op = ready.top();
    ready.pop();
    return op;
  }
  void request_stop() {
    {
      std::lock_guard<std::mutex> guard(m);
      stop = true;
    }
    cv.notify_all();
  }
  size_t size() {
    std::lock_guard<std::mutex> guard(m);
    return ready.size();
  }
};

// Count of operations pushed and not complete; wait_all() waits for it to reach zero.
struct MxPendingCounter {
  std::atomic<long long> pending{0};
  std::mutex m;
  std::condition_variable cv;
  bool stop_requested = false;

  void add() { pending.fetch_add(1, std::memory_order_relaxed); }
  long long pending_count() { return pending.load(std::memory_order_acquire); }
  // true when this call brought the count to zero and a stop was requested
  bool done_one() {
    if (pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return false;
    bool stop;
    {
      std::lock_guard<std::mutex> guard(m);
      stop = stop_requested;
    }
    cv.notify_all();
    return stop;
  }
  bool wait_zero_ms(int ms) {
    std::unique_lock<std::mutex> lock(m);
    return cv.wait_for(lock, std::chrono::milliseconds(ms),
                       [this] { return pending.load(std::memory_order_acquire) == 0; });
  }
  // Records a stop request; true if nothing is pending (the pools may stop now).
  bool request_stop() {
    std::lock_guard<std::mutex> guard(m);
    stop_requested = true;
    return pending.load(std::memory_order_acquire) == 0;
  }
};

// Serialises pushes so that every var sees operations in one global push order (two
// threads pushing onto the same two vars in opposite order would otherwise deadlock).
struct MxPushLock {
  std::mutex m;
  void lock() { m.lock(); }
  void unlock() { m.unlock(); }
};

inline int mx_opr_release(MxOpr* op) { return op->wait.fetch_sub(1, std::memory_order_acq_rel) == 1; }
inline int mx_opr_release_n(MxOpr* op, int n) {
  return op->wait.fetch_sub(n, std::memory_order_acq_rel) == n;
}
inline void mx_opr_set_wait(MxOpr* op, int n) { op->wait.store(n, std::memory_order_relaxed); }
