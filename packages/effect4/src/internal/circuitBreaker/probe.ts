/**
 * Whether a breaker's half-open trials are running now, for the bridge to Effect 4's own breaker service
 * (`persistence.ts`, whose `HalfOpen` state says `probing`): the public `CircuitBreaker` interface does not tell,
 * so the local and fleet breakers register it here for the objects they return.
 */
const probes = new WeakMap<object, () => boolean>()

export const register = <B extends object>(breaker: B, probing: () => boolean): B => {
  probes.set(breaker, probing)
  return breaker
}

/** False for a breaker that did not register (none of ours). */
export const probing = (breaker: object): boolean => probes.get(breaker)?.() ?? false
