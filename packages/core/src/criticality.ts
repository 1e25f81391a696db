/**
 * Admission by criticality: a server under a concurrency limit keeps part of it for the traffic that matters
 * most. A request of criticality `c` is admitted while the calls in flight stay below `limit × share(c)`, so
 * when load rises, `sheddable` requests are refused first, then `default`, and `critical` ones only when the
 * whole limit is in use.
 */

export type Criticality = "critical" | "default" | "sheddable"

export const criticalities: ReadonlyArray<Criticality> = ["critical", "default", "sheddable"]

/** The share of the limit each criticality may fill, in (0, 1]; `critical` is always 1. */
export interface Shares {
  readonly default: number
  readonly sheddable: number
}

export const defaultShares: Shares = { default: 0.9, sheddable: 0.7 }

/** How many calls may be in flight when a request of this criticality arrives (at least 1 while `limit >= 1`). */
export const threshold = (limit: number, criticality: Criticality, shares: Shares): number => {
  if (criticality === "critical") return limit
  const share = criticality === "default" ? shares.default : shares.sheddable
  return Math.max(Math.min(1, limit), Math.floor(limit * share))
}

/** Whether a request of this criticality gets in now. */
export const admit = (limit: number, inflight: number, criticality: Criticality, shares: Shares): boolean =>
  inflight < threshold(limit, criticality, shares)

/**
 * Parses a criticality header value: one of the three names, any case, surrounding spaces ignored. Anything else
 * (missing, empty, unknown, a list) is `undefined`, and the caller decides the default — a client cannot raise
 * its own priority with a malformed value.
 */
export const parse = (value: string | undefined): Criticality | undefined => {
  if (value === undefined) return undefined
  const name = value.trim().toLowerCase()
  return name === "critical" || name === "default" || name === "sheddable" ? name : undefined
}
