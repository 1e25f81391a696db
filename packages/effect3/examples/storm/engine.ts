/**
 * A virtual clock and a run-to-idle scheduler: the discrete-event core the storm runs on.
 *
 * Every fiber of a run is scheduled here, not on Node's event loop. The driver runs ready fibers until none
 * is left (every fiber is then waiting on a sleep or on another fiber), moves the clock to the earliest timer
 * and fires it, and repeats. Time only moves when nothing can run, so a run is deterministic and takes no
 * real time beyond the CPU its fibers use.
 *
 * Why not `TestClock`: its `adjust` checks that every fiber is suspended by polling with real `setTimeout`s
 * and sorts all sleeps again for every timer it fires, so each of the storm's several hundred thousand timer
 * events would cost milliseconds. The library takes time only from the `Clock` service, so this clock is as
 * good a stand-in as `TestClock` and costs a heap operation per timer.
 */
import type { Exit } from "effect"
import { Clock, Duration, Effect, Scheduler } from "effect"
import { TimerHeap } from "../../../../examples/storm/timerHeap.js"

export class Simulator {
  private nowMs = 0
  private readonly timers = new TimerHeap()
  private tasks: Array<() => void> = []

  readonly scheduler: Scheduler.Scheduler = Scheduler.make(
    (task) => {
      this.tasks.push(task)
    },
    Scheduler.defaultShouldYield
  )

  readonly clock: Clock.Clock = {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: () => this.nowMs,
    currentTimeMillis: Effect.sync(() => this.nowMs),
    unsafeCurrentTimeNanos: () => BigInt(Math.round(this.nowMs * 1_000_000)),
    currentTimeNanos: Effect.sync(() => BigInt(Math.round(this.nowMs * 1_000_000))),
    sleep: (duration) => {
      const ms = Duration.toMillis(duration)
      if (!(ms > 0)) return Effect.void
      return Effect.async<void>((resume) => {
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
    const fiber = Effect.runFork(Effect.withClock(effect, this.clock), { scheduler: this.scheduler })
    for (;;) {
      this.drain()
      const exit = fiber.unsafePoll()
      if (exit !== null) return exit
      const timer = this.timers.popLive()
      // nothing left to wake up, or not before the limit: the fibers still waiting are abandoned
      if (timer === undefined || timer.at > untilMs) return undefined
      this.nowMs = timer.at
      timer.fire!()
    }
  }
}
