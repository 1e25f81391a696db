import * as sf from "@effect-resilience/core/structuredFields"
import { Option } from "effect"

export const parseSfString = (value: string): Option.Option<string> => Option.fromNullable(sf.parseSfString(value))

export const formatSfString = (value: string): Option.Option<string> =>
  Option.fromNullable(typeof value === "string" ? sf.serializeString(value) : undefined)

export const parseIdempotencyKey = (
  value: string,
  options?: { readonly maxLength?: number | undefined }
): Option.Option<string> => Option.fromNullable(sf.parseIdempotencyKey(value, options?.maxLength ?? 255))
