/**
 * Which deliveries a message is charged with when its consumer dies (issue 31), as plain functions shared by
 * every source: the memory source runs them; PostgreSQL (`delivery_state`, `suspect`) and Redis (the hash
 * `<stream>:deliveries`, core/streamQueueScripts.ts) apply the same rule in their own statements and scripts.
 *
 * A process that dies (`process.exit`, SIGKILL, the OOM killer) runs no finalizer, so nothing is decided at its
 * death: the next claim of each message it held decides, from what was stored before. A delivery is stored as
 * claimed, and, just before a handler runs with no other handler beside it in its process, as running alone. A
 * delivery that ends without a verdict (no ack, release or dead-letter: its consumer died, or lost it when its
 * visibility timeout ran out) is then judged when the message is claimed again:
 *
 * - lost while running alone: it is charged — its receive stays counted, as one that failed would — because
 *   nothing else ran in that process;
 * - lost while merely claimed (waiting in a buffer, waiting for its acknowledgement, or running beside other
 *   handlers) by a consumer that runs suspects alone (`Consumer.run`, which claims with `runsSuspectsAlone`): its
 *   receive is given back, as one released unprocessed is, because any of the handlers running then may have
 *   ended the process and no one can tell which — the message's own crash will be caught when it runs alone;
 * - lost by any other consumer (a loop of your own around `receive`, which promised nothing): charged, as every
 *   lost delivery always was, so that such a loop still dead-letters a poison after `maxReceiveCount` crashes;
 * - either way the message becomes a *suspect*, and the consumer runs it alone next time (`mustRunAlone`): once
 *   the handlers running then have ended, with no other handler started and nothing more claimed until it is
 *   settled, so that if it kills the process again, that crash is its own, and the only messages held beside it
 *   are other suspects (not charged either). A verdict (its handler returned, and failed) clears the suspicion; a
 *   release unprocessed keeps it.
 *
 * So a healthy message is never charged for a crash beside it, and a poison is dead-lettered after
 * `maxReceiveCount` crashes of its own, alone — one crash later than if every crash were charged to every
 * message held, when its first crash happened beside other handlers.
 */

/** Not held by a consumer: never delivered, or released (with a verdict, or unprocessed). */
export const NOT_HELD = 0
/**
 * Held by a consumer that runs suspects alone and has not run this one alone: buffered, running beside other
 * handlers, or awaiting its ack. A loss of it is given back.
 */
export const CLAIMED = 1
/**
 * Held, and a loss of it is charged: its handler runs alone in its consumer's process (`markAlone`), or its
 * consumer does not run suspects alone (a plain `receive`).
 */
export const CHARGED = 2

export type DeliveryState = typeof NOT_HELD | typeof CLAIMED | typeof CHARGED

/** What a source stores about a message to attribute crashes: the rest of its row or entry aside. */
export interface Attribution {
  /** Receives charged to the message, the current delivery included: `Message.receiveCount`. */
  readonly receiveCount: number
  readonly state: DeliveryState
  /** Its last delivery was lost with its consumer: `Message.suspect`, it runs alone. */
  readonly suspect: boolean
}

/** A message never delivered. */
export const fresh: Attribution = { receiveCount: 0, state: NOT_HELD, suspect: false }

/** Whether a delivery in `state` is lost when the message is claimed again (no verdict ended it). */
export const lost = (state: DeliveryState): boolean => state !== NOT_HELD

/** Whether a lost delivery in `state` stays charged to the message: one that ran alone, or a plain claim. */
export const charged = (state: DeliveryState): boolean => state === CHARGED

/** How a claim is stored: by a consumer that runs suspects alone, or a plain one. */
export const claimedState = (runsSuspectsAlone: boolean): DeliveryState => runsSuspectsAlone ? CLAIMED : CHARGED

/**
 * A claim: the previous delivery, if it was lost, is judged; then this one is counted, and stored as the
 * claimer promised (`runsSuspectsAlone`: it runs every suspect alone, after `runAlone`).
 */
export const claim = (a: Attribution, runsSuspectsAlone: boolean): Attribution => {
  const kept = lost(a.state) && !charged(a.state) ? Math.max(0, a.receiveCount - 1) : a.receiveCount
  return { receiveCount: kept + 1, state: claimedState(runsSuspectsAlone), suspect: a.suspect || lost(a.state) }
}

/** The holder is about to run the handler with no other handler beside it: a loss from now on is charged. */
export const runAlone = (a: Attribution): Attribution => ({ ...a, state: CHARGED })

/**
 * A release by the holder: with a verdict (its handler returned), the suspicion is cleared; unprocessed
 * (`undoReceive`: from a buffer, after its visibility timeout ran out there, or at shutdown), the receive is given
 * back and the suspicion kept.
 */
export const release = (a: Attribution, undoReceive: boolean): Attribution =>
  undoReceive
    ? { receiveCount: Math.max(0, a.receiveCount - 1), state: NOT_HELD, suspect: a.suspect }
    : { receiveCount: a.receiveCount, state: NOT_HELD, suspect: false }

/** Whether the consumer must run a delivery alone in its process: its previous delivery was lost with it. */
export const mustRunAlone = (suspect: boolean | undefined): boolean => suspect === true

/**
 * The order a claimed batch is handled in: the messages that are not suspects first, as claimed; then the
 * suspects, the ones charged fewest receives first (a message that already crashed alone is the likelier poison:
 * the suspects still held when it kills the process again come back only after their visibility timeout). Stable;
 * the same array when there is no suspect.
 */
export const handlingOrder = <M extends { readonly receiveCount: number; readonly suspect?: boolean | undefined }>(
  batch: ReadonlyArray<M>
): ReadonlyArray<M> => {
  if (!batch.some((m) => mustRunAlone(m.suspect))) return batch
  const healthy = batch.filter((m) => !mustRunAlone(m.suspect))
  const suspects = batch.filter((m) => mustRunAlone(m.suspect))
    .map((m, i) => [m, i] as const)
    .sort(([a, i], [b, j]) => a.receiveCount - b.receiveCount || i - j)
    .map(([m]) => m)
  return [...healthy, ...suspects]
}
