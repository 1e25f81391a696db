/**
 * The storm's world: one server of fixed capacity, clients that time out, and a trigger that takes most of
 * the capacity away for a while. Only the server's resource is plain code; every decision a client or the
 * server's admission makes is taken by the library (see policies.ts).
 *
 * The resource has `concurrency` workers, each busy `serviceMs` per request, fed from one first-in-first-out
 * queue, so a request's latency is its wait in the queue plus its service. A client that gives up does not
 * take its request back: the request stays in the queue and a worker serves it later, for nobody. That wasted
 * work is what keeps a retrying fleet collapsed once it has collapsed.
 */

/** The virtual clock the world runs on (engine.ts' `Simulator`, in either edition). */
export interface Timers {
  readonly now: number
  /** Calls `fire` when the clock reaches `at`; clearing the returned timer's `fire` cancels it. */
  at(at: number, fire: () => void): { fire: (() => void) | undefined }
}

export interface Scenario {
  /** Clients sharing the offered load; each has its own retry budget and throttle. */
  readonly clients: number
  /** Workers of the server's resource, and the time each request takes one of them. */
  readonly concurrency: number
  readonly serviceMs: number
  /** Each attempt's client-side timeout. */
  readonly attemptTimeoutMs: number
  /** Arrivals are evenly spaced per client, each moved by up to ± this fraction of the spacing. */
  readonly arrivalJitter: number
  readonly durationMs: number
  /** The trigger: from `triggerStartMs` to `triggerEndMs` the resource keeps `triggerFactor` of its workers. */
  readonly triggerStartMs: number
  readonly triggerEndMs: number
  readonly triggerFactor: number
  /** The `Retry-After` the server sends with a 503. */
  readonly retryAfterMs: number
  /** Goodput is counted in buckets of this width. */
  readonly bucketMs: number
  /** The clients' throttles' `maxRejectionRate`; absent: the library's default. */
  readonly maxRejectionRate?: number
}

export const defaultScenario: Scenario = {
  clients: 5,
  concurrency: 10,
  serviceMs: 400,
  attemptTimeoutMs: 2_000,
  arrivalJitter: 0.2,
  durationMs: 40_000,
  triggerStartMs: 5_000,
  triggerEndMs: 25_000,
  triggerFactor: 0.3,
  retryAfterMs: 1_000,
  bucketMs: 1_000
}

/** Requests per second the resource completes at full strength. */
export const capacityOf = (scenario: Scenario): number => scenario.concurrency * 1_000 / scenario.serviceMs

interface Job {
  /** Called when a worker has finished the request; cleared when the client gave up. */
  done: (() => void) | undefined
}

/** The server's fixed-capacity resource: a FIFO queue in front of `concurrency` workers. */
export class Resource {
  private workers: number
  private busy = 0
  private queue: Array<Job> = []
  private head = 0
  /** Requests served to the end, wanted or not. */
  served = 0

  constructor(private readonly sim: Timers, private readonly scenario: Scenario) {
    this.workers = scenario.concurrency
    sim.at(scenario.triggerStartMs, () => {
      this.workers = Math.max(1, Math.round(scenario.concurrency * scenario.triggerFactor))
    })
    sim.at(scenario.triggerEndMs, () => {
      this.workers = scenario.concurrency
      this.pump()
    })
  }

  /** Queues a request; `done` is called when it has been served. Returns the job, to abandon it. */
  submit(done: () => void): Job {
    const job: Job = { done }
    this.queue.push(job)
    this.pump()
    return job
  }

  get queued(): number {
    return this.queue.length - this.head
  }

  private pump(): void {
    while (this.busy < this.workers && this.head < this.queue.length) {
      const job = this.queue[this.head++]!
      if (this.head > 4096 && this.head * 2 > this.queue.length) {
        this.queue = this.queue.slice(this.head)
        this.head = 0
      }
      this.busy++
      this.sim.at(this.sim.now + this.scenario.serviceMs, () => {
        this.busy--
        this.served++
        const done = job.done
        job.done = undefined
        if (done !== undefined) done()
        this.pump()
      })
    }
  }
}
