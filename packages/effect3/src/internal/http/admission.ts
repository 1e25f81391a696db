import { HttpServerResponse } from "@effect/platform"
import { Cause, Effect, Exit, type Fiber, FiberId, FiberRef, Scheduler } from "effect"
import { globalValue } from "effect/GlobalValue"
import type { AdaptiveLimiter, LimitExceeded } from "../../AdaptiveLimiter.js"
import { forkDetached } from "../fastPath.js"

/**
 * One request's slot of the load-shed middleware, and what the middlewares inside it may tell it. The slot is
 * held by work the server does, not by the request's wait: a handler the idempotency middleware keeps running
 * after its client stopped waiting holds it until it ends. And only work is sampled: an answer given without
 * running the handler (a replay, a 409) or refusing the request (4xx, 503) teaches the limiter nothing.
 */
export interface Admission {
  /** The request's answer is no sample of the server's work: it was given without running the handler. */
  readonly unsampled: () => void
  /**
   * The slot stays held until `fiber` ends, and `fiber`'s outcome is the sample: work the server still does
   * after the wait for it may have ended (the idempotency middleware's detached handler).
   */
  readonly holdUntil: (fiber: Fiber.RuntimeFiber<unknown, unknown>) => void
}

/** The admission of the request the fiber serves, lent by the load-shed middleware (none without one). */
export const currentAdmission: FiberRef.FiberRef<Admission | undefined> = globalValue(
  "effect-resilience/http/currentAdmission",
  () => FiberRef.unsafeMake<Admission | undefined>(undefined, { fork: (a) => a, join: (parent) => parent })
)

/** Tells the request's admission, if any, that its answer is no sample. */
export const unsampled: Effect.Effect<void> = Effect.withFiberRuntime((fiber) => {
  fiber.getFiberRef(currentAdmission)?.unsampled()
  return Effect.void
})

/** Extends the request's slot, if any, to `fiber`. */
export const holdUntil = (fiber: Fiber.RuntimeFiber<unknown, unknown>): Effect.Effect<void> =>
  Effect.withFiberRuntime((parent) => {
    parent.getFiberRef(currentAdmission)?.holdUntil(fiber)
    return Effect.void
  })

/** The failure that ends a slot whose outcome is no sample; the limiter must not count it as an overload. */
class NotASample {
  readonly _tag = "NotASample"
}
const notASample = new NotASample()

export const isNotASample = (cause: Cause.Cause<unknown>): boolean => {
  const failure = Cause.failureOption(cause)
  return failure._tag === "Some" && failure.value === notASample
}

/** What the limiter learns from an outcome: a sample, nothing, or a failure its `isOverload` judges. */
const sampleOf = (exit: Exit.Exit<unknown, unknown>, skipped: boolean): Effect.Effect<void, unknown> => {
  if (Exit.isFailure(exit)) return Effect.failCause(exit.cause)
  if (skipped) return Effect.fail(notASample)
  const value = exit.value
  // a 4xx or a 5xx says the work was refused, or failed, before it was done: it measures no capacity
  return HttpServerResponse.isServerResponse(value) && value.status >= 400 ? Effect.fail(notASample) : Effect.void
}

const WAITING = 0
const ADMITTED = 1
const REFUSED = 2
const ABANDONED = 3
const RELEASED = 4

/**
 * The slot is held by a fiber of its own (the holder), inside `limiter.protect`, so that it can outlive the
 * request's fiber: the request answers as soon as its app does, while the holder waits for the work still
 * running. The holder's protected effect ends with the outcome to sample, and the limiter times it from
 * admission to the end of the last piece of work.
 */
class RequestSlot implements Admission {
  state = WAITING
  holder: Fiber.RuntimeFiber<void> | undefined = undefined
  private onDecision: ((decision: Effect.Effect<void, LimitExceeded>) => void) | undefined = undefined
  private refusal: Exit.Exit<void, LimitExceeded> | undefined = undefined
  private release: ((outcome: Effect.Effect<void, unknown>) => void) | undefined = undefined
  private skipped = false
  private answer: Exit.Exit<unknown, unknown> | undefined = undefined
  private readonly held: Array<Exit.Exit<unknown, unknown> | undefined> = []
  private running = 0

  /**
   * Where the holder's wakeup is scheduled: run by `settle` on its own stack, so the slot is given back (and the
   * sample taken) before the request's answer goes out, as if the request had held the slot itself.
   */
  private readonly wakeup = new Scheduler.SyncScheduler()

  /** Run by the holder inside its slot: waits for the outcome. */
  readonly occupy = Effect.withScheduler(
    Effect.async<void, unknown>((resume) => {
      if (this.state === ABANDONED) {
        this.state = RELEASED
        return resume(Effect.fail(notASample))
      }
      this.state = ADMITTED
      this.release = resume
      this.onDecision?.(Effect.void)
    }),
    this.wakeup
  )

  /** The holder's protect ended: without admission, that is the refusal (its only typed failure). */
  decided(exit: Exit.Exit<void, unknown>): void {
    if (this.state !== WAITING) return
    this.state = REFUSED
    this.refusal = exit as Exit.Exit<void, LimitExceeded>
    this.onDecision?.(this.refusal)
  }

  /** The request's wait for admission (none when the limiter decides at once, as it does without a queue). */
  readonly decision = Effect.async<void, LimitExceeded>((resume) => {
    if (this.state === ADMITTED) return resume(Effect.void)
    if (this.state === REFUSED) return resume(this.refusal!)
    this.onDecision = resume
  })

  /** The request was interrupted before its app started: no app will end the slot. */
  abandon(): void {
    this.onDecision = undefined
    if (this.state === WAITING) {
      this.state = ABANDONED
      this.holder?.unsafeInterruptAsFork(FiberId.none)
    } else if (this.state === ADMITTED && this.answer === undefined) {
      this.answered(Exit.fail(notASample))
    }
  }

  unsampled(): void {
    this.skipped = true
  }

  holdUntil(fiber: Fiber.RuntimeFiber<unknown, unknown>): void {
    // late: the slot was given back already (e.g. a fiber the handler left behind)
    if (this.state !== ADMITTED) return
    const index = this.held.push(undefined) - 1
    this.running++
    fiber.addObserver((exit) => {
      this.held[index] = exit
      this.running--
      this.settle()
    })
  }

  answered(exit: Exit.Exit<unknown, unknown>): void {
    this.answer = exit
    this.settle()
  }

  /** Gives the slot back once the app has answered and every piece of held work has ended. */
  private settle(): void {
    if (this.answer === undefined || this.running > 0 || this.state !== ADMITTED) return
    this.state = RELEASED
    const release = this.release!
    this.release = undefined
    // the held work is the work; the request's own answer only when nothing was held
    const first = this.held[0]
    release(first === undefined ? sampleOf(this.answer, this.skipped) : sampleOf(first, false))
    this.wakeup.flush()
  }
}

/**
 * Runs `app` in a slot of `limiter`, with the admission in {@link currentAdmission}, or `onRefused` without
 * running it. The slot is given back when `app` and the work it held have ended, however they end.
 */
export const runAdmitted = <A, E, R>(
  limiter: AdaptiveLimiter,
  app: Effect.Effect<A, E, R>,
  onRefused: (refusal: LimitExceeded) => Effect.Effect<A>
): Effect.Effect<A, E, R> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.suspend(() => {
      const slot = new RequestSlot()
      const holding = Effect.flatMap(
        Effect.exit(limiter.protect(slot.occupy)),
        (exit) => Effect.sync(() => slot.decided(exit))
      )
      // interruptible, so that a queued holder whose request went away leaves the queue
      return Effect.flatMap(forkDetached(Effect.interruptible(holding)), (holder) => {
        slot.holder = holder
        return Effect.matchEffect(
          // an interruption just after admission (before the app could start) must give the slot back too
          Effect.onInterrupt(restore(slot.decision), () => Effect.sync(() => slot.abandon())),
          {
            onFailure: onRefused,
            onSuccess: () =>
              Effect.onExit(
                restore(Effect.locally(app, currentAdmission, slot)),
                (exit) => Effect.sync(() => slot.answered(exit))
              )
          }
        )
      })
    })
  )
