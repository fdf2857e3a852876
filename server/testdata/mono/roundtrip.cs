// roundtrip drives a broker with the RabbitMQ .NET client 4.0 that Debian
// ships for Mono (libmono-rabbitmq4.0-cil), which speaks only AMQP 0-8 and
// 0-9. It publishes two messages, gets and acks one, consumes and acks the
// other, and checks that a passive declare of a missing queue closes the
// channel with 404. Used by TestMonoRabbitMQClient.
//
// Usage: mono roundtrip.exe HOST PORT 0-8|0-9 QUEUE
using System;
using System.Text;
using RabbitMQ.Client;
using RabbitMQ.Client.Events;
using RabbitMQ.Client.Exceptions;

class Roundtrip {
  static int Main(string[] args) {
    var cf = new ConnectionFactory();
    cf.HostName = args[0];
    cf.Port = int.Parse(args[1]);
    cf.Protocol = args[2] == "0-8" ? Protocols.AMQP_0_8 : Protocols.AMQP_0_9;
    cf.UserName = "guest";
    cf.Password = "guest";
    cf.VirtualHost = "/";
    string q = args[3];
    using (IConnection conn = cf.CreateConnection()) {
      IModel ch = conn.CreateModel();
      ch.QueueDeclare(q, false, false, false, true, false, null);
      ch.BasicQos(0, 10, false);
      IBasicProperties props = ch.CreateBasicProperties();
      props.ContentType = "text/plain";
      ch.BasicPublish("", q, props, Encoding.UTF8.GetBytes("one"));
      ch.BasicPublish("", q, props, Encoding.UTF8.GetBytes("two"));

      BasicGetResult got = null;
      for (int i = 0; i < 100 && got == null; i++) {
        got = ch.BasicGet(q, false);
        if (got == null) System.Threading.Thread.Sleep(20);
      }
      if (got == null) { Console.WriteLine("basic.get found nothing"); return 1; }
      Console.WriteLine("got " + Encoding.UTF8.GetString(got.Body) + " " + got.BasicProperties.ContentType);
      ch.BasicAck(got.DeliveryTag, false);

      var consumer = new QueueingBasicConsumer(ch);
      string tag = ch.BasicConsume(q, false, null, consumer);
      object o;
      if (!consumer.Queue.Dequeue(5000, out o)) { Console.WriteLine("no delivery within 5 s"); return 1; }
      var d = (BasicDeliverEventArgs)o;
      Console.WriteLine("delivered " + Encoding.UTF8.GetString(d.Body) + " redelivered=" + d.Redelivered);
      ch.BasicAck(d.DeliveryTag, false);
      ch.BasicCancel(tag);
      Console.WriteLine("deleted, messages left " + ch.QueueDelete(q, false, false, false));
      ch.Close();

      IModel ch2 = conn.CreateModel();
      try {
        ch2.QueueDeclare(q + "-missing", true, false, false, false, false, null);
        Console.WriteLine("passive declare of a missing queue succeeded");
        return 1;
      } catch (OperationInterruptedException e) {
        Console.WriteLine("passive declare: " + e.ShutdownReason.ReplyCode + " " + e.ShutdownReason.ReplyText);
      }
      conn.Close();
    }
    Console.WriteLine("ok");
    return 0;
  }
}
