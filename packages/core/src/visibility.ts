/**
 * The queue's visibility rules, as plain functions of counts and instants (epoch milliseconds).
 *
 * A received message is invisible to other receivers for the visibility timeout; if it is neither
 * acknowledged, released nor dead-lettered by then, it becomes visible again and its next delivery counts
 * one more receive (the lost one given back, unless it ran alone: core/crashAttribution.ts). A message that
 * failed on its `maxReceiveCount`-th delivery, or was delivered more often than that (its consumers kept
 * crashing), goes to the dead-letter queue instead of running again.
 *
 * The memory source and the consumer run these functions; PostgreSQL and Redis apply the same rules in
 * their own statements and scripts.
 */

/** Visibility timeouts are whole milliseconds, never shorter than asked. */
export const visibilityMillis = (millis: number): number => Math.ceil(millis)

/** When a message received at `receivedAt` becomes visible again unless it is settled first. */
export const invisibleUntil = (receivedAt: number, visibility: number): number => receivedAt + visibility

/**
 * Whether a delivery has outlived its visibility timeout (the source may have handed the message to
 * another receiver): its holder must not start the handler.
 */
export const isExpired = (receivedAt: number, visibility: number, now: number): boolean =>
  now >= invisibleUntil(receivedAt, visibility)

/** The receive count after one more delivery. */
export const delivered = (receiveCount: number): number => receiveCount + 1

/**
 * The receive count after a release: unchanged, or one less when the delivery is given back unprocessed
 * (`undoReceive`), never below zero.
 */
export const afterRelease = (receiveCount: number, undoReceive: boolean): number =>
  undoReceive ? Math.max(0, receiveCount - 1) : receiveCount

/** When a released message is visible again: `undefined` for at once (no delay, or one of zero or less). */
export const visibleAfterRelease = (now: number, delayMillis: number): number | undefined =>
  delayMillis <= 0 ? undefined : now + delayMillis

/**
 * What to do with a delivery whose handler failed: dead-letter it when the failure is fatal or this was
 * its last allowed delivery, otherwise release it for another attempt.
 */
export type AfterFailure = "DeadLetterFatal" | "DeadLetterExhausted" | "Release"

export const afterFailure = (fatal: boolean, receiveCount: number, maxReceiveCount: number): AfterFailure =>
  fatal ? "DeadLetterFatal" : receiveCount >= maxReceiveCount ? "DeadLetterExhausted" : "Release"

/**
 * Whether a delivery arrives already past its limit (earlier deliveries ended without a verdict, e.g. the
 * consumer crashed): it goes to the dead-letter queue without running.
 */
export const overLimit = (receiveCount: number, maxReceiveCount: number): boolean => receiveCount > maxReceiveCount

/*
 * Handler time limits and visibility renewal (as SQS's `ChangeMessageVisibility`): while a handler runs, its
 * consumer pushes the message's visibility out again, so a slow handler that is still within its time limit
 * is never handed to a second worker. An extension makes the message invisible for one more visibility
 * timeout from the instant it is made.
 */

/** A handler's time limit when none is configured: the visibility timeout of its source. */
export const defaultTimeLimit = (visibility: number): number => visibility

/** How long closing a consumer waits for running handlers when no grace is configured: at most 10 s. */
export const DEFAULT_SHUTDOWN_GRACE = 10_000

export const defaultShutdownGrace = (timeLimit: number): number => Math.min(timeLimit, DEFAULT_SHUTDOWN_GRACE)

/**
 * Why a time limit cannot be accepted, or `undefined` when it can: a handler that outlives the visibility
 * timeout of a source that cannot extend it would be handed to another worker while it still runs.
 */
export const timeLimitProblem = (timeLimit: number, visibility: number, canExtend: boolean): string | undefined =>
  canExtend || timeLimit <= visibility ?
    undefined :
    `a handler time limit (timeout) of ${timeLimit} ms is longer than the source's visibility timeout of ` +
    `${visibility} ms, and the source cannot extend a message's visibility: the message would be delivered ` +
    `again while its handler still runs. Shorten timeout, or lengthen the visibility timeout`

/**
 * When to extend a delivery that stays invisible until `visibleUntil`: once a third of the visibility timeout
 * is left (never at once: a handler that ends in the first two thirds costs no extension).
 */
export const renewAt = (visibleUntil: number, visibility: number): number =>
  visibleUntil - Math.max(1, Math.floor(visibility / 3))

/** Until when an extension made at `now` keeps the message invisible. */
export const extendedUntil = (now: number, visibility: number): number => now + visibility

/**
 * Whether a handler started at `startedAt` with a time limit of `timeLimit` can still be running when its
 * first extension is due: if not, no renewal is needed at all.
 */
export const needsRenewal = (
  startedAt: number,
  timeLimit: number,
  visibleUntil: number,
  visibility: number
): boolean => startedAt + timeLimit >= renewAt(visibleUntil, visibility)

/**
 * When to try again after an extension failed (the engine did not answer): a tenth of the visibility timeout
 * later, or `undefined` when that is too late (the message is visible again by then; the handler runs on).
 */
export const retryRenewAt = (now: number, visibleUntil: number, visibility: number): number | undefined => {
  const next = now + Math.max(1, Math.floor(visibility / 10))
  return next < visibleUntil ? next : undefined
}
