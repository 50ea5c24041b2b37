/**
 * The key a token names, as a FROM item exposing `a` (api_keys) and `t` (api_key_tokens): the
 * token is the key's current one (`expires_at` null) or one a rotation superseded and whose own
 * 24 hours have not ended; the key is not revoked (revocation ends every token at once). Tokens
 * are found by their SHA-256 (the primary key); the token itself is never stored.
 */
export const keyForToken = (tokenHash: string) => `
  api_key_tokens t join api_keys a on a.id = t.api_key_id
   and t.token_hash = ${tokenHash} and (t.expires_at is null or t.expires_at > now()) and a.revoked_at is null`;
