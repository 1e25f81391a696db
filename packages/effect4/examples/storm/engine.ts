/**
 * A virtual clock and a run-to-idle scheduler on Effect 4: the discrete-event core the storm runs on (the Effect 3
 * edition's examples/storm/engine.ts, on this edition's `Scheduler` and `Clock`).
 *
 * Every fiber of a run is scheduled here, not on Node's event loop. The driver runs ready fibers until none
 * is left (every fiber is then waiting on a sleep or on another fiber), moves the clock to the earliest timer
 * and fires it, and repeats. Time only moves when nothing can run, so a run is deterministic and takes no
 * real time beyond the CPU its fibers use.
 *
 * Why not `TestClock`: the storm fires several hundred thousand timers, and this clock costs a heap operation per
 * timer. The library takes time only from the `Clock` service, so this clock is as good a stand-in.
 */
import { Clock, Duration, Effect, type Exit, type Scheduler } from "effect"
import type { Timers } from "../../../../examples/storm/model.js"
import { TimerHeap } from "../../../../examples/storm/timerHeap.js"

/** How many operations a fiber runs before it lets the others run (Effect's own default). */
const maxOpsBeforeYield = 2048

export class Simulator implements Timers {
  private nowMs = 0
  private readonly timers = new TimerHeap()
  private tasks: Array<() => void> = []

  readonly scheduler: Scheduler.Scheduler = {
    executionMode: "async",
    shouldYield: (fiber) => fiber.currentOpCount >= maxOpsBeforeYield,
    makeDispatcher: () => ({
      scheduleTask: (task) => {
        this.tasks.push(task)
      },
      flush: () => this.drain()
    })
  }

  readonly clock: Clock.Clock = {
    currentTimeMillisUnsafe: () => this.nowMs,
    currentTimeMillis: Effect.sync(() => this.nowMs),
    currentTimeNanosUnsafe: () => this.nanos(),
    currentTimeNanos: Effect.sync(() => this.nanos()),
    monotonicTimeNanosUnsafe: () => this.nanos(),
    monotonicTimeNanos: Effect.sync(() => this.nanos()),
    sleep: (duration) => {
      const ms = Duration.toMillis(duration)
      if (!(ms > 0)) return Effect.void
      return Effect.callback<void>((resume) => {
        const timer = this.at(this.nowMs + ms, () => resume(Effect.void))
        return Effect.sync(() => {
          timer.fire = undefined
        })
      })
    }
  }

  get now(): number {
    return this.nowMs
  }

  private nanos(): bigint {
    return BigInt(Math.round(this.nowMs * 1_000_000))
  }

  /** Calls `fire` when the clock reaches `at` (timers at the same instant fire in the order they were set). */
  at(at: number, fire: () => void): { fire: (() => void) | undefined } {
    return this.timers.push(Math.max(at, this.nowMs), fire)
  }

  private drain(): void {
    while (this.tasks.length > 0) {
      const batch = this.tasks
      this.tasks = []
      for (let i = 0; i < batch.length; i++) batch[i]!()
    }
  }

  /**
   * Runs `effect` with this clock and scheduler until it ends or the clock would pass `untilMs`; returns its
   * exit, or `undefined` when time ran out first or nothing is left that could wake a fiber.
   */
  run<A, E>(effect: Effect.Effect<A, E>, untilMs: number): Exit.Exit<A, E> | undefined {
    const fiber = Effect.runFork(Effect.provideService(effect, Clock.Clock, this.clock), {
      scheduler: this.scheduler
    })
    for (;;) {
      this.drain()
      const exit = fiber.pollUnsafe()
      if (exit !== undefined) return exit
      const timer = this.timers.popLive()
      // nothing left to wake up, or not before the limit: the fibers still waiting are abandoned
      if (timer === undefined || timer.at > untilMs) return undefined
      this.nowMs = timer.at
      timer.fire!()
    }
  }
}
