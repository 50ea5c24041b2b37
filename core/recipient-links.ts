import { deriveKey } from './secrets';
import { readUnsubscribeToken, unsubscribeToken, type UnsubscribeTarget } from './contacts/unsubscribe-token';
import { clickToken, pixelToken, readClickToken, readPixelToken } from './tracking/tokens';

/**
 * The public links a message carries for its recipient, signed under keys derived from
 * SECRETS_KEY (one per purpose): unsubscribe under PUBLIC_URL, open pixel and click redirects
 * under the sender domain's tracking host. Paths: /u/<token>, /t/o/<token>, /t/c/<token>,
 * all served by the API's HTTP server without a key (api/public/).
 */
export interface RecipientLinks {
  unsubscribeUrl(target: UnsubscribeTarget): string;
  readUnsubscribe(token: string): UnsubscribeTarget | null;
  pixelUrl(trackingHost: string, emailId: string): string;
  clickUrl(trackingHost: string, emailId: string, url: string): string;
  readPixel(token: string): { emailId: string } | null;
  readClick(token: string): { emailId: string; url: string } | null;
}

export function createRecipientLinks(master: Buffer, publicUrl: string): RecipientLinks {
  const unsubscribe = deriveKey(master, 'unsubscribe');
  const tracking = deriveKey(master, 'tracking');
  const base = publicUrl.replace(/\/+$/, '');
  return {
    unsubscribeUrl: (t) => `${base}/u/${unsubscribeToken(unsubscribe, t)}`,
    readUnsubscribe: (token) => readUnsubscribeToken(unsubscribe, token),
    pixelUrl: (host, emailId) => `https://${host}/t/o/${pixelToken(tracking, emailId)}`,
    clickUrl: (host, emailId, url) => `https://${host}/t/c/${clickToken(tracking, emailId, url)}`,
    readPixel: (token) => readPixelToken(tracking, token),
    readClick: (token) => readClickToken(tracking, token),
  };
}
