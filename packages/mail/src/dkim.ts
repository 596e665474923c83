/**
 * The header fields to sign: nodemailer's defaults (RFC 6376 §5.4.1) plus
 * `List-Unsubscribe-Post`, which RFC 8058 requires the DKIM signature to cover along with
 * `List-Unsubscribe` (nodemailer's list has the one, not the other). Pass it as
 * `dkim.headerFieldNames` in the transport options.
 */
export const DKIM_HEADER_FIELD_NAMES = [
  "From:Sender:Reply-To:Subject:Date:Message-ID:To:Cc:MIME-Version:Content-Type:Content-Transfer-Encoding:Content-ID",
  "Content-Description:Resent-Date:Resent-From:Resent-Sender:Resent-To:Resent-Cc:Resent-Message-ID:In-Reply-To:References",
  "List-Id:List-Help:List-Unsubscribe:List-Unsubscribe-Post:List-Subscribe:List-Post:List-Owner:List-Archive",
].join(":");
