// Reads "key<TAB>value" lines (the kafka sink's messages) on stdin and converts each with
// Kafka Connect's own JsonConverter (schemas.enable=true), as a Kafka Connect sink would;
// prints one JSON line per message: {"key": {...}, "value": {...}} with every field as exact
// text (Decimal: BigDecimal.toPlainString, Date: epoch days, Timestamp: epoch ms, bytes:
// hex, Struct: nested object, null: null). A field the declared schema cannot read fails it.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.json.JsonConverter;

public class ConnectJsonRead {
  public static void main(String[] args) throws Exception {
    JsonConverter keys = new JsonConverter();
    keys.configure(Map.of("schemas.enable", "true"), true);
    JsonConverter values = new JsonConverter();
    values.configure(Map.of("schemas.enable", "true"), false);
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      int tab = line.indexOf('\t');
      byte[] key = line.substring(0, tab).getBytes(StandardCharsets.UTF_8);
      byte[] value = line.substring(tab + 1).getBytes(StandardCharsets.UTF_8);
      SchemaAndValue k = keys.toConnectData("t", key);
      SchemaAndValue v = values.toConnectData("t", value);
      System.out.println("{\"key\":" + text(k.value()) + ",\"value\":" + text(v.value()) + "}");
    }
  }

  static String text(Object value) {
    if (value == null) return "null";
    if (value instanceof Struct) {
      Struct struct = (Struct) value;
      StringBuilder out = new StringBuilder("{");
      for (Field field : struct.schema().fields()) {
        if (out.length() > 1) out.append(',');
        out.append(quote(field.name())).append(':').append(text(struct.get(field)));
      }
      return out.append('}').toString();
    }
    if (value instanceof BigDecimal) return quote(((BigDecimal) value).toPlainString());
    if (value instanceof java.util.Date) {
      return quote(value.getClass().getName() + ":" + ((java.util.Date) value).getTime());
    }
    if (value instanceof byte[]) return quote("hex:" + hex((byte[]) value));
    if (value instanceof ByteBuffer) {
      ByteBuffer buffer = ((ByteBuffer) value).duplicate();
      byte[] bytes = new byte[buffer.remaining()];
      buffer.get(bytes);
      return quote("hex:" + hex(bytes));
    }
    if (value instanceof String) return quote((String) value);
    return quote(value.getClass().getSimpleName() + ":" + value);
  }

  static String hex(byte[] bytes) {
    StringBuilder out = new StringBuilder();
    for (byte b : bytes) out.append(String.format("%02x", b));
    return out.toString();
  }

  static String quote(String text) {
    StringBuilder out = new StringBuilder("\"");
    for (char c : text.toCharArray()) {
      if (c == '"' || c == '\\') out.append('\\').append(c);
      else if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
      else out.append(c);
    }
    return out.append('"').toString();
  }
}
