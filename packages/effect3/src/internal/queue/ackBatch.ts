import { Deferred, Effect, Exit } from "effect"

interface Waiting<I, E> {
  readonly item: I
  readonly done: Deferred.Deferred<boolean, E>
  /** Taken into a statement: from then on its outcome is the statement's. */
  sent: boolean
}

/**
 * Group acknowledgement: acks that arrive while one engine call is under way wait for it and then go out
 * together, in one call (`flush`, one answer per item: whether its fenced delete matched). One ack alone
 * goes out at once, as before, so a lone consumer waits for nothing; sixteen workers acking at once share
 * one round trip and one commit.
 *
 * Nothing is acked early: each caller's effect ends only when the call that carried its item has answered,
 * with that item's own answer, and a failed call fails every item it carried. The fencing is the engine's, per
 * item (each carries its receipt), so a stale owner's ack matches nothing however it is grouped. An ack
 * interrupted while still waiting is taken out of the queue and never sent; once sent it stands.
 *
 * The calls run one after another in one fiber, forked (a daemon, uninterruptible: it ends when the queue is
 * empty, and nothing may leave items waiting behind a fiber that is gone) by the ack that found it idle. Each
 * call is bounded by the engine client's own timeout, as a lone ack is.
 */
export const ackBatcher = <I, E>(
  max: number,
  flush: (items: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<boolean>, E>
): (item: I) => Effect.Effect<boolean, E> => {
  let pending: Array<Waiting<I, E>> = []
  let running = false
  const drain: Effect.Effect<void> = Effect.suspend(() => {
    if (pending.length === 0) {
      running = false
      return Effect.void
    }
    const batch = pending.length <= max ? pending : pending.slice(0, max)
    pending = pending.length <= max ? [] : pending.slice(max)
    for (const w of batch) w.sent = true
    return Effect.flatMap(Effect.exit(flush(batch.map((w) => w.item))), (exit) => {
      for (let i = 0; i < batch.length; i++) {
        const done = batch[i]!.done
        Deferred.unsafeDone(
          done,
          Exit.isSuccess(exit) ? Exit.succeed(exit.value[i] === true) : Exit.failCause(exit.cause)
        )
      }
      return drain
    })
  })
  return (item) =>
    Effect.uninterruptibleMask((restore) =>
      Effect.withFiberRuntime<boolean, E>((fiber) => {
        const w: Waiting<I, E> = { item, done: Deferred.unsafeMake<boolean, E>(fiber.id()), sent: false }
        pending.push(w)
        const wait = restore(Deferred.await(w.done)).pipe(
          Effect.onInterrupt(() =>
            Effect.sync(() => {
              if (!w.sent) pending = pending.filter((other) => other !== w)
            })
          )
        )
        if (running) return wait
        running = true
        return Effect.zipRight(Effect.forkDaemon(Effect.uninterruptible(drain)), wait)
      })
    )
}
