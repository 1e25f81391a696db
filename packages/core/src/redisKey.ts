/** Redis key parts, shared by every Redis store and the fleet breaker in both editions. */

/**
 * One part of a key inside a hash tag. `%`, `:`, `{` and `}` are percent-encoded, so the parts
 * joined by `:` are unambiguous and the tag ends exactly at the closing brace.
 */
export const escapePart = (part: string): string => /[%:{}]/.test(part) ? part.replace(/[%:{}]/g, encodeChar) : part

const encodeChar = (c: string): string => c === "%" ? "%25" : c === ":" ? "%3A" : c === "{" ? "%7B" : "%7D"

/**
 * The part of `key` Redis Cluster hashes to pick its slot: the text between the first `{` and the next `}`
 * when it is not empty; `undefined` when there is none (the whole key is hashed).
 */
export const hashTagOf = (key: string): string | undefined => {
  const open = key.indexOf("{")
  if (open === -1) return undefined
  const close = key.indexOf("}", open + 1)
  return close > open + 1 ? key.slice(open + 1, close) : undefined
}
