import { EntitySchema } from '@mikro-orm/core';

export class Attachment {
  id!: string;
  emailId!: string;
  position!: number;
  filename!: string;
  contentType!: string;
  size!: number;
  content!: Buffer;
}

export const AttachmentSchema = new EntitySchema<Attachment>({
  class: Attachment,
  tableName: 'attachments',
  properties: {
    id: { type: 'uuid', primary: true },
    emailId: { type: 'uuid' },
    position: { type: 'integer' },
    filename: { type: 'text' },
    contentType: { type: 'text' },
    size: { type: 'integer' },
    content: { type: 'blob', lazy: true },
  },
});
