/**
 * The queue's visibility rules, as plain functions of counts and instants (epoch milliseconds).
 *
 * A received message is invisible to other receivers for the visibility timeout; if it is neither
 * acknowledged, released nor dead-lettered by then, it becomes visible again and its next delivery counts
 * one more receive. A message that failed on its `maxReceiveCount`-th delivery, or was delivered more often
 * than that (its consumers kept crashing), goes to the dead-letter queue instead of running again.
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
